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
