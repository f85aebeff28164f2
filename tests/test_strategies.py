"""Roles from TF_CONFIG and the strategy factory."""

from __future__ import annotations

import dataclasses
import json

import pytest

from components.core import strategies
from components.core.config import ClusterConfig, ConfigError, RunConfig, TrainingConfig
from components.core.strategies import Role
from components.core.strategy_spec import STRATEGIES, spec_for


def _tf_config(cluster, kind, index):
    return json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}})


def test_no_tf_config_is_a_single_chief_process():
    role = Role.from_tf_config(None)
    assert role.is_chief and role.task_type is None and role.name == "local"


def test_worker_zero_is_chief_only_without_a_chief_task():
    workers = {"worker": ["a:1", "b:2"]}
    assert Role.from_tf_config(_tf_config(workers, "worker", 0)).is_chief
    assert not Role.from_tf_config(_tf_config(workers, "worker", 1)).is_chief
    with_chief = {"chief": ["c:0"], **workers}
    assert Role.from_tf_config(_tf_config(with_chief, "chief", 0)).is_chief
    assert not Role.from_tf_config(_tf_config(with_chief, "worker", 0)).is_chief


def test_parameter_server_workers_and_ps_only_serve():
    cluster = ClusterConfig("parameter_server", workers=2, ps=1)
    spec = {"chief": ["c:0"], "worker": ["w:1", "w:2"], "ps": ["p:3"]}
    assert strategies.is_server_role(cluster, Role.from_tf_config(_tf_config(spec, "ps", 0)))
    assert strategies.is_server_role(cluster, Role.from_tf_config(_tf_config(spec, "worker", 1)))
    assert not strategies.is_server_role(cluster, Role.from_tf_config(_tf_config(spec, "chief", 0)))


def test_malformed_tf_config_is_refused():
    with pytest.raises(ConfigError, match="TF_CONFIG"):
        Role.from_tf_config("{not json")


def test_factory_refuses_unknown_names():
    with pytest.raises(ConfigError, match="unknown strategy"):
        strategies.make_strategy(RunConfig(cluster=ClusterConfig("horovod")), Role())


def test_factory_builds_single_process_strategies():
    import tensorflow as tf

    one = strategies.make_strategy(RunConfig(cluster=ClusterConfig("one_device")), Role())
    assert one is tf.distribute.get_strategy()
    assert one.num_replicas_in_sync == 1


def test_multi_worker_strategies_need_a_cluster():
    with pytest.raises(ConfigError, match="TF_CONFIG"):
        cluster = ClusterConfig("multi_worker_mirrored", workers=2)
        strategies.make_strategy(RunConfig(cluster=cluster), Role())


MWM = ClusterConfig("multi_worker_mirrored", workers=2)
XLA = TrainingConfig(jit_compile=True)

# (strategy, --all-reduce, GPUs of the machine) -> the all-reduce, and what tf.distribute gets.
COMMUNICATION = [
    (MWM, 8, ("nccl", "NCCL", None)),
    (MWM, 0, ("ring", "RING", None)),
    (ClusterConfig("multi_worker_mirrored", all_reduce="ring"), 8, ("ring", "RING", None)),
    (ClusterConfig("mirrored"), 8, ("auto", None, None)),  # TF's collective: NCCL on GPUs
    (ClusterConfig("mirrored", all_reduce="nccl"), 8, ("nccl", None, "NcclAllReduce")),
    (
        ClusterConfig("mirrored", all_reduce="hierarchical_copy"),
        8,
        ("hierarchical_copy", None, "HierarchicalCopyAllReduce"),
    ),
    (
        ClusterConfig("mirrored", all_reduce="reduction_to_one_device"),
        0,
        ("reduction_to_one_device", None, "ReductionToOneDevice"),
    ),
    (ClusterConfig("parameter_server", workers=2, ps=1), 8, ("auto", None, None)),
    (ClusterConfig("one_device"), 0, ("auto", None, None)),
]


@pytest.mark.parametrize(("cluster", "gpus", "expected"), COMMUNICATION)
def test_communication_for_each_strategy_and_machine(cluster, gpus, expected):
    comm = strategies.communication(RunConfig(cluster=cluster), gpus)
    assert (comm.all_reduce, comm.implementation, comm.cross_device_ops) == expected


def test_xla_compiles_the_step_with_gpus_and_the_model_without():
    """XLA lowers collectives to NCCL only; on CPU it compiles none, nor remote variables."""
    xla_ring = RunConfig(cluster=dataclasses.replace(MWM, all_reduce="ring"), training=XLA)
    with pytest.raises(ConfigError, match="--jit-compile compiles only NCCL or auto"):
        strategies.communication(xla_ring, 8)
    assert strategies.communication(RunConfig(cluster=MWM, training=XLA), 8).all_reduce == "nccl"
    # Without GPUs the ring all-reduce runs outside XLA, which compiles the model only.
    assert strategies.communication(xla_ring, 0).all_reduce == "ring"
    scopes = {
        (name, gpus): spec_for(name).xla_scope(gpus) for name in STRATEGIES for gpus in (0, 8)
    }
    assert scopes == {
        ("one_device", 0): "train_step",
        ("one_device", 8): "train_step",
        ("mirrored", 0): "model",
        ("mirrored", 8): "train_step",
        ("multi_worker_mirrored", 0): "model",
        ("multi_worker_mirrored", 8): "train_step",
        ("parameter_server", 0): None,
        ("parameter_server", 8): "train_step",
    }
    ps = RunConfig(cluster=ClusterConfig("parameter_server", workers=2, ps=1), training=XLA)
    with pytest.raises(ConfigError, match="variables that live on other tasks"):
        strategies.communication(ps, 0)
    assert strategies.communication(ps, 8).all_reduce == "auto"


def test_communication_refuses_what_the_machine_cannot_run():
    nccl = ClusterConfig("multi_worker_mirrored", all_reduce="nccl")
    with pytest.raises(ConfigError, match="needs GPUs"):
        strategies.communication(RunConfig(cluster=nccl), 0)
    unknown = ClusterConfig("multi_worker_mirrored", all_reduce="foo")
    with pytest.raises(ConfigError, match="does not apply"):
        strategies.communication(RunConfig(cluster=unknown), 8)


@pytest.mark.parametrize(("gpus", "implementation"), [(2, "NCCL"), (0, "RING")])
def test_multi_worker_mirrored_on_a_machine_with_gpus_carries_nccl(
    gpus, implementation, monkeypatch
):
    """The strategy as the trainer builds it (one worker: no TF_CONFIG in this process)."""
    import tensorflow as tf

    monkeypatch.delenv("TF_CONFIG", raising=False)
    role = Role("worker", 0, {"worker": ["localhost:1"]})
    cluster = ClusterConfig("multi_worker_mirrored", workers=1)
    strategy = strategies.make_strategy(RunConfig(cluster=cluster), role, gpus=gpus)
    assert isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
    options = strategy.extended._communication_options  # what its all-reduces run with
    assert options.implementation == getattr(
        tf.distribute.experimental.CommunicationImplementation, implementation
    )


def test_mirrored_takes_the_chosen_cross_device_ops():
    import tensorflow as tf

    cluster = ClusterConfig("mirrored", gpus_per_machine=1, all_reduce="nccl")
    strategy = strategies.make_strategy(RunConfig(cluster=cluster), Role(), gpus=1)
    assert isinstance(strategy.extended._cross_device_ops, tf.distribute.NcclAllReduce)
    cluster = ClusterConfig("mirrored", gpus_per_machine=1, all_reduce="reduction_to_one_device")
    strategy = strategies.make_strategy(RunConfig(cluster=cluster), Role(), gpus=0)
    assert isinstance(strategy.extended._cross_device_ops, tf.distribute.ReductionToOneDevice)
