"""Roles from TF_CONFIG and the strategy factory."""

from __future__ import annotations

import json

import pytest

from components.core import strategies
from components.core.config import ClusterConfig, ConfigError
from components.core.strategies import Role


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
        strategies.make_strategy(ClusterConfig("horovod"), Role())


def test_factory_builds_single_process_strategies():
    import tensorflow as tf

    one = strategies.make_strategy(ClusterConfig("one_device"), Role())
    assert one is tf.distribute.get_strategy()
    assert one.num_replicas_in_sync == 1


def test_multi_worker_strategies_need_a_cluster():
    with pytest.raises(ConfigError, match="TF_CONFIG"):
        strategies.make_strategy(ClusterConfig("multi_worker_mirrored", workers=2), Role())
