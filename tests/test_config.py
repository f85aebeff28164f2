"""Typed config: round trips and the cluster shapes each strategy accepts."""

from __future__ import annotations

import pytest

from components.core.config import (
    ClusterConfig,
    ConfigError,
    RunConfig,
    TrainingConfig,
    cluster_for,
    per_replica_from_global,
    validate_cluster,
    validate_for_machine,
    validate_run,
)


def test_json_round_trip_keeps_every_field():
    config = RunConfig(
        cluster=ClusterConfig("parameter_server", workers=3, ps=2),
        training=TrainingConfig(epochs=7, per_replica_batch_size=16),
        output_dir="/tmp/x",
    )
    assert RunConfig.from_json(config.to_json()) == config


def test_unknown_keys_are_refused():
    raw = RunConfig().to_dict()
    raw["training"]["epochz"] = 3
    with pytest.raises(ConfigError, match="epochz"):
        RunConfig.from_dict(raw)


@pytest.mark.parametrize(
    ("cluster", "replicas", "processes"),
    [
        (ClusterConfig("one_device"), 1, 1),
        (ClusterConfig("mirrored", gpus_per_machine=4), 4, 1),
        (ClusterConfig("multi_worker_mirrored", workers=3), 3, 3),
        # 2 machines x 4 GPUs: 8 replicas, not 2.
        (ClusterConfig("multi_worker_mirrored", workers=2, gpus_per_machine=4), 8, 2),
        (ClusterConfig("parameter_server", workers=3, ps=2), 3, 6),
        (ClusterConfig("parameter_server", workers=3, ps=2, gpus_per_machine=2), 6, 6),
    ],
)
def test_replicas_and_processes(cluster, replicas, processes):
    validate_cluster(cluster)
    assert cluster.num_replicas == replicas
    assert cluster.num_processes == processes


@pytest.mark.parametrize(
    ("cluster", "message"),
    [
        (ClusterConfig("ring_allreduce"), "unknown strategy"),
        (ClusterConfig("mirrored", workers=2), "runs on one machine"),
        (ClusterConfig("mirrored", ps=1), "has no parameter servers"),
        (ClusterConfig("multi_worker_mirrored", workers=2, ps=1), "has no parameter servers"),
        (ClusterConfig("parameter_server", workers=2, ps=0), "at least one parameter server"),
        (ClusterConfig("multi_worker_mirrored", workers=0), "--workers must be at least 1"),
        (ClusterConfig("parameter_server", workers=2, ps=-1), "--ps must be 0 or more"),
        (ClusterConfig("mirrored", gpus_per_machine=0), "--gpus-per-machine must be at least 1"),
        (ClusterConfig("one_device", gpus_per_machine=2), "one_device trains on one device"),
        (
            ClusterConfig("multi_worker_mirrored", all_reduce="hierarchical_copy"),
            "--all-reduce hierarchical_copy does not apply to multi_worker_mirrored: "
            "choose auto, nccl, ring",
        ),
        (
            ClusterConfig("mirrored", all_reduce="ring"),
            "choose auto, nccl, hierarchical_copy, reduction_to_one_device",
        ),
        (
            ClusterConfig("parameter_server", workers=2, ps=1, all_reduce="nccl"),
            "parameter_server has no all-reduce to choose: drop --all-reduce nccl",
        ),
        (ClusterConfig("mirrored", all_reduce="fastest"), "does not apply to mirrored"),
    ],
)
def test_impossible_shapes_are_refused(cluster, message):
    with pytest.raises(ConfigError, match=message):
        validate_cluster(cluster)


def test_global_batch_must_divide_across_replicas():
    cluster = ClusterConfig("multi_worker_mirrored", workers=3)
    assert per_replica_from_global(96, cluster) == 32
    with pytest.raises(ConfigError, match="multiple of 3"):
        per_replica_from_global(100, cluster)


def test_run_validation_names_the_flag():
    with pytest.raises(ConfigError, match="--epochs"):
        validate_run(RunConfig(training=TrainingConfig(epochs=0)))


@pytest.mark.parametrize(
    ("cluster", "message"),
    [
        (ClusterConfig("multi_worker_mirrored", workers=2, all_reduce="nccl"), "use auto or ring"),
        (ClusterConfig("mirrored", all_reduce="nccl"), "use auto or reduction_to_one_device"),
        (ClusterConfig("mirrored", all_reduce="hierarchical_copy"), "needs GPUs"),
    ],
)
def test_gpu_only_all_reduce_is_refused_without_gpus(cluster, message):
    config = RunConfig(cluster=cluster)
    validate_run(config)  # a valid run: only the machine decides
    validate_for_machine(config, gpus=2)
    with pytest.raises(ConfigError, match=message):
        validate_for_machine(config, gpus=0)


def test_auto_all_reduce_is_nccl_with_gpus_and_ring_without():
    spec = ClusterConfig("multi_worker_mirrored").spec
    assert spec.resolve_all_reduce("auto", gpus=8) == "nccl"
    assert spec.resolve_all_reduce("auto", gpus=0) == "ring"
    assert spec.resolve_all_reduce("ring", gpus=8) == "ring"  # an explicit choice stays


def test_cluster_for_gives_all_reduce_only_to_strategies_that_take_it():
    clusters = [
        cluster_for(name, all_reduce="nccl")
        for name in ("one_device", "mirrored", "multi_worker_mirrored", "parameter_server")
    ]
    assert [c.all_reduce for c in clusters] == ["auto", "nccl", "nccl", "auto"]
