"""The one strategy spec: the local rehearsal's cluster has the cloud job's shape."""

from __future__ import annotations

import json

import pytest

from components.core.config import ClusterConfig, ConfigError, cluster_for
from components.core.launch import kubeflow, vertex
from components.core.launch.local_tasks import plan_tasks
from components.core.strategy_spec import STRATEGIES, spec_for
from tests.test_cloud_config import make_cloud, make_run

# Vertex AI names the TF_CONFIG cluster entries of pools 0-2 chief, worker, ps;
# the evaluator (pool 3) is not part of the cluster.
VERTEX_TASK_TYPES = {0: "chief", 1: "worker", 2: "ps"}

SHAPES = [
    ("one_device", {}),
    ("mirrored", {"gpus_per_machine": 4}),
    ("multi_worker_mirrored", {"workers": 1}),
    ("multi_worker_mirrored", {"workers": 3}),
    ("multi_worker_mirrored", {"workers": 2, "gpus_per_machine": 4}),
    ("parameter_server", {"workers": 3, "ps": 2}),
]


def local_cluster(cluster: ClusterConfig) -> dict[str, int]:
    """Task type -> count in the TF_CONFIG the local launcher gives every task."""
    tasks = plan_tasks(cluster)
    configs = [json.loads(task.tf_config) for task in tasks]
    assert all(c["cluster"] == configs[0]["cluster"] for c in configs)
    assert sorted((c["task"]["type"], c["task"]["index"]) for c in configs) == sorted(
        (kind, i) for kind, hosts in configs[0]["cluster"].items() for i in range(len(hosts))
    )
    return {kind: len(hosts) for kind, hosts in configs[0]["cluster"].items()}


def vertex_cluster(run) -> dict[str, int]:
    job = vertex.build_custom_job(run, make_cloud())
    return {
        VERTEX_TASK_TYPES[i]: pool.replica_count
        for i, pool in enumerate(job.job_spec.worker_pool_specs)
        if pool.replica_count and i in VERTEX_TASK_TYPES
    }


def tfjob_cluster(run) -> dict[str, int]:
    cloud = make_cloud(target="kubeflow", project=None, region=None)
    job = kubeflow.build_tfjob(run, cloud)
    return {kind.lower(): spec["replicas"] for kind, spec in job["spec"]["tfReplicaSpecs"].items()}


@pytest.mark.parametrize(("strategy", "shape"), SHAPES)
def test_local_tf_config_has_the_cloud_jobs_shape(strategy, shape):
    run = make_run(strategy, **shape)
    local = local_cluster(run.cluster)
    assert local == vertex_cluster(run) == tfjob_cluster(run)
    assert local == spec_for(strategy).task_counts(run.cluster)
    assert local["chief"] == 1  # every strategy has a chief, here as in the cloud


@pytest.mark.parametrize(("strategy", "shape"), SHAPES)
def test_cloud_gpus_follow_the_replica_count(strategy, shape):
    """Every replica the config counts is a GPU the job asks for."""
    run = make_run(strategy, **shape)
    job = vertex.build_custom_job(run, make_cloud())
    gpu_roles = spec_for(strategy).gradient_roles
    gpus = sum(
        pool.replica_count * pool.machine_spec.accelerator_count
        for i, pool in enumerate(job.job_spec.worker_pool_specs)
        if i in VERTEX_TASK_TYPES and VERTEX_TASK_TYPES[i] in gpu_roles
    )
    assert gpus == run.cluster.num_replicas


def test_roles_per_strategy():
    ps = spec_for("parameter_server")
    assert ps.serving_roles == ("worker", "ps")
    assert ps.primary_roles == ("chief", "evaluator")  # servers never exit
    assert ps.restartable_alone == ("worker", "evaluator") and ps.gradient_roles == ("worker",)
    mwms = spec_for("multi_worker_mirrored")
    assert mwms.serving_roles == () and mwms.restartable_alone == ("evaluator",)
    assert mwms.all_reduces_across_machines and not ps.all_reduces_across_machines


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_cluster_for_fills_each_strategys_defaults(strategy):
    cluster = cluster_for(strategy)
    spec = spec_for(strategy)
    assert cluster.workers == spec.default_workers() and cluster.ps == spec.default_ps()
    assert cluster.gpus_per_machine == spec.default_devices
    assert not spec.shape_errors(cluster)


def test_a_shared_shape_keeps_each_strategy_valid():
    assert cluster_for("mirrored", workers=4, ps=2, devices=3) == ClusterConfig("mirrored", 1, 0, 3)
    assert cluster_for("one_device", workers=4, devices=3) == ClusterConfig("one_device", 1, 0, 1)
    assert cluster_for("multi_worker_mirrored", 4, 2, 3) == ClusterConfig(
        "multi_worker_mirrored", 4, 0, 3
    )


def test_unknown_strategy_is_refused_with_the_choices():
    with pytest.raises(ConfigError, match="choose one of one_device, mirrored"):
        spec_for("horovod")
