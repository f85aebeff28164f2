"""GPU node-pool scheduling of the train step, per compile target."""

from dataclasses import dataclass

from components.core.hardware import get_gpu

GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class GpuPlacement:
    """Where the train step runs.

    Attributes:
        target: `vertex` (accelerator settings in the pipeline spec) or `kubeflow`
            (plus kfp-kubernetes node selector and toleration).
        gpu: GPU name from the hardware vocabulary (`t4`, `a100`, ...).
        count: GPUs for the task.
    """

    target: str
    gpu: str
    count: int = 1


def place_training(task, placement: GpuPlacement | None) -> None:
    """Applies `placement` to a train task (no-op for None)."""
    if placement is None:
        return
    gpu = get_gpu(placement.gpu)
    gpu.machine_type(placement.count)  # refuses counts no machine takes
    if placement.target == "vertex":
        task.set_accelerator_type(gpu.vertex_accelerator)
        task.set_accelerator_limit(placement.count)
        return
    from kfp import kubernetes

    task.set_accelerator_type(GPU_RESOURCE)
    task.set_accelerator_limit(placement.count)
    kubernetes.add_node_selector(task, GKE_ACCELERATOR_LABEL, gpu.gke_accelerator)
    kubernetes.add_toleration(task, key=GPU_RESOURCE, operator="Exists", effect="NoSchedule")


# Devices per machine a local (kfp.local) run rehearses: logical CPU devices under mirrored.
LOCAL_DEVICES = 2


@dataclass(frozen=True)
class SpecDefaults:
    """Pipeline parameter defaults that depend on where the compiled spec runs.

    Attributes:
        backend: where the train step trains: `local` (on the step's own
            machine: kfp.local, or a train step placed on GPUs), else the
            target's cloud job (`vertex` CustomJob, `kubeflow` TFJob).
        devices: devices (GPUs) per machine: the placed step's GPU count, the
            compiled `--gpus-per-machine` (1 unless given) for a cloud job,
            `LOCAL_DEVICES` logical CPU devices for kfp.local.
    """

    backend: str = "local"
    devices: int = LOCAL_DEVICES


def spec_defaults(
    target: str | None, placement: GpuPlacement | None, gpus_per_machine: int = 1
) -> SpecDefaults:
    """The defaults of a spec compiled for `target` (None: run by kfp.local).

    Args:
        target: the compile target, or None for kfp.local.
        placement: the train step's GPUs, or None (it trains as the target's job).
        gpus_per_machine: the compiled `--gpus-per-machine`: the GPUs of a cloud
            job's machines the select step chooses for; the job's GPU count
            follows the cluster it chooses (`launch.cloud.resolved_gpus`).
    """
    if placement is not None:
        return SpecDefaults("local", placement.count)
    if target is None:
        return SpecDefaults()
    return SpecDefaults(target, gpus_per_machine)
