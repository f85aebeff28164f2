"""The compiled KFP train step's pod against a real API server (tests/kube/cluster.py)."""

from __future__ import annotations

import json

import pytest
import yaml

from pipelines.compile import compile_pipeline
from tests.kube.cluster import NAMESPACE

LAUNCHER_VOLUME = "kfp-launcher"


def train_step_pod(compiled: list[dict], step: str = "exec-train") -> dict:
    """The pod the KFP v2 backend makes for `step` of a compiled pipeline.

    From the compiled YAML, as the backend's driver does (kubeflow/pipelines
    backend/src/v2/driver/driver.go, `initPodSpecPatch` and `extendPodSpecPatch`):
    the container `main` runs the image; its command is the launcher's, followed by
    `--` and the step's own command and arguments; the accelerator becomes a limit
    of its resource type, CPU and memory requests and limits become the same
    quantities (memory in G); the platform document's node selector and tolerations
    become the pod's.

    Approximated: the launcher's own arguments (pipeline name, run and execution
    ids, the executor input as JSON: fixed stand-ins here); Argo's `wait` sidecar
    and its emissary executor (left out); the init container copying the launcher
    into the shared `kfp-launcher` emptyDir (its image is a stand-in); the
    metadata server's address (in the backend, from a ConfigMap).
    """
    pipeline, platform = compiled
    container = pipeline["deploymentSpec"]["executors"][step]["container"]
    resources = container.get("resources", {})
    limits, requests = {}, {}
    accelerator = resources.get("accelerator")
    if accelerator:
        kind = accelerator.get("resourceType") or accelerator["type"]
        limits[kind] = str(accelerator.get("resourceCount") or accelerator["count"])
    for field, table, resource in (
        ("cpuLimit", limits, "cpu"),
        ("cpuRequest", requests, "cpu"),
        ("memoryLimit", limits, "memory"),
        ("memoryRequest", requests, "memory"),
    ):
        if resources.get(field):
            table[resource] = f"{resources[field]}{'G' if resource == 'memory' else ''}"
    executor = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"].get(step, {})
    launcher = [
        "/kfp-launcher/launch",
        "--pipeline_name",
        pipeline["pipelineInfo"]["name"],
        "--run_id",
        "run-1",
        "--execution_id",
        "1",
        "--executor_input",
        json.dumps({"inputs": {}}),
        "--pod_name",
        "$(KFP_POD_NAME)",
        "--pod_uid",
        "$(KFP_POD_UID)",
        "--",
    ]
    field_env = [
        {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
        for name, path in (("KFP_POD_NAME", "metadata.name"), ("KFP_POD_UID", "metadata.uid"))
    ]
    mount = [{"name": LAUNCHER_VOLUME, "mountPath": "/kfp-launcher"}]
    spec = {
        "restartPolicy": "Never",
        "initContainers": [
            {
                "name": "kfp-launcher",
                "image": "gcr.io/ml-pipeline/kfp-launcher:2.0.5",
                "command": ["launcher-v2", "--copy", "/kfp-launcher/launch"],
                "volumeMounts": mount,
            }
        ],
        "containers": [
            {
                "name": "main",
                "image": container["image"],
                "command": launcher,
                "args": [*container.get("command", []), *container.get("args", [])],
                "env": field_env,
                "resources": {"limits": limits, "requests": requests},
                "volumeMounts": mount,
            }
        ],
        "volumes": [{"name": LAUNCHER_VOLUME, "emptyDir": {}}],
    }
    if "nodeSelector" in executor:
        spec["nodeSelector"] = executor["nodeSelector"]["labels"]
    if "tolerations" in executor:
        spec["tolerations"] = executor["tolerations"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train-step"}, "spec": spec}


@pytest.mark.parametrize(("gpu", "gpus"), [("t4", 1), ("a100", 2)])
def test_the_compiled_train_steps_pod_is_accepted(kube_cluster, tmp_path, gpu, gpus):
    """The kfp-target train step, placed on GPUs, makes a pod the server's dry run accepts
    whole: the image, the step's command, the GPU limit, the node pool and the taint."""
    from kubernetes import client as k8s

    output = compile_pipeline("training", "kfp", tmp_path / "p.yaml", gpu=gpu, gpus=gpus)
    pod = train_step_pod(list(yaml.safe_load_all(output.read_text())))
    core = k8s.CoreV1Api(kube_cluster.api_client("admin"))
    stored = core.api_client.sanitize_for_serialization(
        core.create_namespaced_pod(NAMESPACE, pod, dry_run="All")
    )
    (main,) = stored["spec"]["containers"]
    assert main["image"] == pod["spec"]["containers"][0]["image"]
    assert main["args"][-2:] == ["--function_to_execute", "train"]
    assert main["resources"]["limits"] == {"nvidia.com/gpu": str(gpus)}
    assert main["resources"]["requests"] == {"nvidia.com/gpu": str(gpus)}  # the server's default
    accelerator = {"t4": "nvidia-tesla-t4", "a100": "nvidia-tesla-a100"}[gpu]
    assert stored["spec"]["nodeSelector"] == {"cloud.google.com/gke-accelerator": accelerator}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in stored[
        "spec"
    ]["tolerations"]
    with pytest.raises(k8s.ApiException):
        core.read_namespaced_pod("train-step", NAMESPACE)  # a dry run stores nothing


def test_a_pod_with_a_broken_platform_spec_is_refused(kube_cluster, tmp_path):
    """The dry run is a check that can fail: a toleration whose operator Kubernetes does
    not know is refused (422)."""
    from kubernetes import client as k8s

    output = compile_pipeline("training", "kfp", tmp_path / "p.yaml", gpu="t4")
    compiled = list(yaml.safe_load_all(output.read_text()))
    executor = compiled[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]["exec-train"]
    executor["tolerations"][0]["operator"] = "Sometimes"
    core = k8s.CoreV1Api(kube_cluster.api_client("admin"))
    with pytest.raises(k8s.ApiException) as refused:
        core.create_namespaced_pod(NAMESPACE, train_step_pod(compiled), dry_run="All")
    assert refused.value.status == 422
