"""Fields renamed for one name per quantity are still read under their old names."""

import json

from components.core.config import RunConfig
from components.core.run_metrics import RunMetrics


def test_a_run_config_with_devices_per_worker_reads_as_gpus_per_machine():
    raw = RunConfig().to_dict()
    cluster = raw["cluster"]
    cluster["devices_per_worker"] = cluster.pop("gpus_per_machine") + 3
    config = RunConfig.from_dict(raw)
    assert config.cluster.gpus_per_machine == 4
    assert "devices_per_worker" not in json.dumps(config.to_dict())


def test_a_record_with_devices_per_worker_reads_as_gpus_per_machine(tmp_path):
    from tests.test_run_metrics import a_record  # a complete record of the current schema

    raw = a_record().to_dict()
    raw["devices_per_worker"] = raw.pop("gpus_per_machine") + 1
    assert RunMetrics.from_dict(raw).gpus_per_machine == raw["devices_per_worker"]
