"""Tests of topology."""

from __future__ import annotations

import json

import pytest

from components.core.config import ConfigError
from components.core.model_profile import PUBLISHED_PROFILES
from components.core.selection import Topology, recommend
from pipelines.cli import main
from tests.selection_helpers import RESNET101


@pytest.mark.parametrize(
    "topology",
    [
        Topology(0, 8),
        Topology(1, 0),
        Topology(1, 1, "k40"),
        Topology(1, 2, "v100", "infiniband"),
        Topology(2, 2, "v100", network_gbps=-1),
        Topology(2, 2, "v100", precision="fp8"),
    ],
)
def test_invalid_hardware_raises_config_error(topology):
    with pytest.raises(ConfigError):
        recommend(topology, RESNET101)


def test_preemptions_whose_restarts_fill_the_hour_train_nothing(capsys):
    """60 preemptions an hour x 300 s a restart is 18,000 s of restarts an hour: it said
    'take 90% off' and predicted 18 examples/s; now it is refused. A rate one machine
    survives but a synchronous run over 4 does not leaves that run infeasible, and a
    share below the whole is said as it is, not capped at 90%."""
    argv = ["select", "--machines", "4", "--gpus-per-machine", "1", "--model", "resnet50",
            "--preemptible", "--preemptions-per-machine-hour"]  # fmt: skip
    assert main([*argv, "60"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert (
        "--preemptions-per-machine-hour 60: each preemption costs a restart of about 300 s, "
        "so 12 or more an hour leave a machine no time to train (60 x 300 s = 18,000 s of "
        "restarts an hour); give the rate the machines see"
    ) in err
    assert main([*argv, "6"]) == 2
    assert main([*argv, "2", "--network-gbps", "25", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["strategy"] == "parameter_server"
    mwm = next(a for a in doc["alternatives"] if a["strategy"] == "multi_worker_mirrored")
    assert mwm["feasible"] is False
    assert mwm["note"] == "its 4 machines' preemption losses fill every hour"
    assert mwm["predicted"]["examples_per_second"] == 0
    assert not any("90%" in r for r in doc["reasons"])
    topology = Topology(4, 1, "v100", network_gbps=25, preemptible=True,
                        preemptions_per_machine_hour=1.4)  # fmt: skip
    rec = recommend(topology, PUBLISHED_PROFILES["resnet50"], batch_size=32)
    mwm = next(a for a in rec.alternatives if a.strategy == "multi_worker_mirrored")
    assert mwm.feasible and mwm.overhead_fraction == pytest.approx(4 * 1.4 * 600 / 3600)


@pytest.mark.parametrize(
    ("gpu", "memory_gb", "fp32", "tf32", "fp16"),
    [
        ("k80", 12, 4.37, 0, 4.37),
        ("p4", 8, 5.5, 0, 5.5),
        ("p100", 16, 9.3, 0, 18.7),
        ("v100", 16, 15.7, 0, 125),
        ("v100-32gb", 32, 15.7, 0, 125),
        ("a10g", 24, 31.2, 62.5, 125),
        ("a100", 40, 19.5, 156, 312),
        ("a100-80gb", 80, 19.5, 156, 312),
        ("h100", 80, 67, 494, 989),
        ("h200", 141, 67, 494, 989),
    ],
)
def test_gpus_as_people_describe_them_are_taken_with_their_published_specs(
    gpu, memory_gb, fp32, tf32, fp16, capsys
):
    """Issue 41: h200, K80, P4, A10G and V100 32 GB were refused as unknown GPUs; each has
    its data sheet's memory and dense peaks, FP32 and TF32 apart, and a source."""
    from components.core.hardware import get_gpu

    spec = get_gpu(gpu)
    assert (spec.memory_gb, spec.peak_tflops_fp32, spec.peak_tflops_tf32) == (memory_gb, fp32, tf32)
    assert spec.peak_tflops_fp16 == fp16 and (spec.source or gpu in ("t4", "p100", "v100"))
    most = 8 if gpu != "p4" else 4
    assert main(["select", "--machines", "2", "--gpus-per-machine", str(min(most, 4)), "--gpu",
                 gpu, "--model", "resnet50", "--network-gbps", "25", "--explain"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert out.startswith("recommended: ")
    said = "fp32 on TF32 tensor cores" if tf32 else "sustained, fp32)"
    assert said in out
