"""Tests of select_cli."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from components.core import model_profile
from components.core.config import ConfigError
from components.core.model_profile import PUBLISHED_PROFILES
from components.core.models import MODELS
from components.core.selection import step_time
from pipelines.cli import main
from tests.selection_helpers import _comparison


@pytest.mark.parametrize(
    ("flag", "value"), [("--gflops-per-example", "100"), ("--activation-bytes-per-example", "1e6")]
)
def test_a_params_only_flag_beside_a_model_is_refused_not_dropped(flag, value, capsys):
    argv = ["select", "--machines", "2", "--gpus-per-machine", "1", "--model", "resnet50"]
    assert main([*argv, flag, value]) == 2
    assert f"{flag} applies to --params only" in capsys.readouterr().err


def test_an_embedding_table_can_be_written_in_exponent_form(capsys):
    argv = ["select", "--machines", "2", "--gpus-per-machine", "1", "--params", "1e6",
            "--sparse-embedding-params", "1e10", "--async-ok", "--json"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["inputs"]["model"]["sparse_embedding_params"] == 10_000_000_000


def test_select_help_names_every_model_select_takes(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["select", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    model_help = " ".join(out.split("\n  --model MODEL")[1].split("\n  --params")[0].split())
    for name in [*MODELS, *PUBLISHED_PROFILES]:
        assert re.search(rf"[(, ]{name}[,;)]", model_help), name


def test_cli_json(capsys):
    rc = main(["select", "--machines", "1", "--gpus-per-machine", "4", "--params", "25000000",
               "--gflops-per-example", "8", "--json"])  # fmt: skip
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["strategy"] == "mirrored" and doc["supported"] is True
    assert doc["layout"] == {"workers": 1, "ps": 0, "gpus_per_machine": 4}
    assert set(doc["predicted"]) == {
        "step_time_s",
        "compute_s",
        "communication_s",
        "examples_per_second",
        "scaling_efficiency",
        "scaling_efficiency_range",
        "examples_per_second_range",
    }
    assert doc["alternatives"] and doc["reasons"]
    # every prediction, the choice's and each alternative's, sits inside its own range;
    # a single GPU's efficiency is 1 by definition, the others' ranges are not points
    for predicted in [doc["predicted"], *(a["predicted"] for a in doc["alternatives"])]:
        low, high = predicted["scaling_efficiency_range"]
        assert 0 < low <= predicted["scaling_efficiency"] <= high <= 1
        low, high = predicted["examples_per_second_range"]
        assert 0 < low < predicted["examples_per_second"] < high
    mirrored = doc["predicted"]["scaling_efficiency_range"]
    assert mirrored[0] < mirrored[1]


def test_cli_json_prices_the_chosen_candidate_as_the_alternatives(capsys):
    argv = ["select", "--machines", "2", "--gpus-per-machine", "4", "--gpu", "t4",
            "--model", "resnet50", "--prices", "--json"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["usd_per_million_examples"] > 0
    cheap, dear = doc["usd_per_million_examples_range"]
    assert cheap < doc["usd_per_million_examples"] < dear
    feasible = [a for a in doc["alternatives"] if a.get("feasible", True)]
    assert feasible and all(a["usd_per_million_examples"] > 0 for a in feasible)
    for candidate in feasible:  # prices follow the range: the fastest end is the cheapest
        cheap, dear = candidate["usd_per_million_examples_range"]
        fast, slow = reversed(candidate["predicted"]["examples_per_second_range"])
        assert cheap < candidate["usd_per_million_examples"] < dear
        assert cheap * fast == pytest.approx(dear * slow, rel=1e-4)  # six digits each


@pytest.mark.parametrize("command", ["select", "status"])
def test_a_reader_that_stops_reading_ends_the_command_quietly(command, tmp_path):
    """`strategist ... | head -1`: the pipe's reader is gone; the command stops without a
    traceback, with 141 (128 + SIGPIPE) as a Unix tool killed by SIGPIPE does. `main`
    handles it, so every subcommand's printing does (select and status shown)."""
    import os

    (tmp_path / "status.json").write_text('{"state": "done"}')
    argv = {
        "select": ["select", "--machines", "1", "--gpus-per-machine", "4", "--params", "2e7"],
        "status": ["status", str(tmp_path)],
    }[command]
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader left before the first write: every write fails
    try:
        done = subprocess.run(
            [sys.executable, "-c", "import sys; from pipelines.cli import main; sys.exit(main())",
             *argv],
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120,
            cwd=Path(__file__).resolve().parents[1],
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (141, "")


@pytest.mark.parametrize("written", ["2e9", "2_000_000_000", "2000000000"])
def test_cli_params_in_scientific_notation(written, capsys):
    assert main(["select", "--machines", "1", "--gpus-per-machine", "1", "--gpu", "t4",
                 "--params", written, "--json"]) == 0  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert doc["strategy"] == "model_parallelism" and doc["supported"] is False
    assert doc["inputs"]["model"]["params"] == 2_000_000_000


def test_cli_params_must_be_whole(capsys):
    with pytest.raises(SystemExit) as info:
        main(["select", "--machines", "1", "--gpus-per-machine", "1", "--params", "1.5"])
    assert info.value.code == 2
    assert "must be a whole number, got 1.5" in capsys.readouterr().err


def test_cli_history_and_text(tmp_path, capsys):
    measured = [("parameter_server", 6000.0), ("multi_worker_mirrored", 3000.0)]
    path = _comparison(tmp_path, "comparison.json", measured)
    rc = main(["select", "--machines", "4", "--gpus-per-machine", "8", "--network-gbps", "100",
               "--gpu", "v100", "--batch-size", "64", "--model", "resnet101",
               "--history", str(tmp_path), "--explain"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0
    assert out.startswith("recommended: parameter_server")
    assert "compute ms" in out and "comm ms" in out
    assert path in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--machines", "0", "--gpus-per-machine", "8", "--params", "1000"], "--machines"),
        (["--machines", "2", "--gpus-per-machine", "8", "--gpu", "x9", "--params", "1000"],
         "unknown GPU"),
        (["--machines", "2", "--gpus-per-machine", "8", "--interconnect", "carrier-pigeon",
          "--params", "1000"], "unknown interconnect"),
        (["--machines", "2", "--gpus-per-machine", "8", "--network-gbps", "-3",
          "--params", "1000"], "--network-gbps"),
        (["--machines", "2", "--gpus-per-machine", "8", "--params", "0"], "--params"),
        (["--machines", "2", "--gpus-per-machine", "2", "--params", "1e6",
          "--activation-bytes-per-example", "inf"], "--activation-bytes-per-example must be"),
        (["--machines", "2", "--gpus-per-machine", "2", "--params", "1e6",
          "--gflops-per-example", "inf"], "--gflops-per-example must be a positive number"),
        (["--machines", "1", "--gpus-per-machine", "2", "--model", "mlp", "--heterogeneous",
          "3"], "--heterogeneous: one machine waits for no slower one"),
        (["--machines", "1", "--gpus-per-machine", "4", "--params", "1000", "--network-gbps",
          "100", "--nics", "2", "--network-path", "overlay"],
         "--network-gbps, --nics, --network-path: one machine sends nothing over a network "
         "between machines (its GPUs talk over their own link); drop them, or give --machines "
         "2 or more"),
        (["--machines", "1", "--gpus-per-machine", "2", "--params", "1000", "--nics", "1"],
         "--nics: one machine sends nothing over a network between machines"),
        (["--machines", "2", "--gpus-per-machine", "4", "--params", "1000",
          "--sparse-embedding-params", "10", "--embedding-dim", "64"],
         "--sparse-embedding-params 10: a table of fewer parameters than one row of "
         "--embedding-dim 64 holds no row; give rows x dim parameters (at least 64)"),
        (["--machines", "2", "--gpus-per-machine", "1", "--gpu", "cpu:1,t4:1", "--params",
          "1000"], "--gpu cpu:1,t4:1: machines without GPUs cannot be part of a GPU mix; ask "
         "about the GPU machines alone (--gpu t4 --machines 1), or the CPU machines alone "
         "(--gpu cpu)"),
        (["--machines", "2", "--gpus-per-machine", "8", "--model", "gpt9"], "unknown model"),
        (["--machines", "2", "--gpus-per-machine", "8", "--params", "10", "--history",
          "/nonexistent/comparison.json"], "run `strategist compare` first"),
        (["--machines", "1", "--gpus-per-machine", "32", "--gpu", "a100", "--params", "10"],
         "no machine holds more than 16 a100"),
        (["--machines", "2", "--gpus-per-machine", "4", "--gpu", "t4", "--interconnect",
          "nvlink", "--params", "10"], "t4 GPUs have no NVLink"),
        (["--machines", "2", "--gpus-per-machine", "8", "--network-gbps", "100000",
          "--params", "10"], "--nics"),
        (["--machines", "2", "--gpus-per-machine", "8", "--nics", "0", "--params", "10"],
         "--nics"),
        (["--machines", "2", "--gpus-per-machine", "8", "--params", "10",
          "--activation-bytes-per-example", "-1"], "--activation-bytes-per-example"),
        # review s14: 1e30 took 187500000000000032768 parameter servers
        (["--machines", "2", "--gpus-per-machine", "1", "--model", "resnet50",
          "--sparse-embedding-params", "1e30"],
         "--sparse-embedding-params 1e+30: more than 1,000,000,000,000,000, ten times the "
         "largest published embedding model (Persia, 1e14 parameters)"),
    ],
)  # fmt: skip
def test_cli_bad_input_exits_2_with_a_message(argv, message, capsys):
    assert main(["select", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("strategist select: error:")
    assert message in err
    assert err.count("\n") == 1


def test_json_and_markdown_together_are_refused(capsys):
    """Review s14: `--json --markdown` printed JSON alone."""
    argv = ["select", "--machines", "2", "--gpus-per-machine", "1", "--model", "mlp"]
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--json", "--markdown"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --markdown: not allowed with argument --json" in err
    assert err.count("\n") == 1


def test_the_largest_embedding_table_taken_is_ten_times_the_largest_published():
    mlp = model_profile.profile_model("mlp")
    most = model_profile.MAX_SPARSE_EMBEDDING_PARAMS
    assert mlp.with_sparse_embedding(most).sparse_embedding_params == most
    with pytest.raises(ConfigError, match="more than 1,000,000,000,000,000"):
        mlp.with_sparse_embedding(most + 64)


def test_a_slower_half_of_an_odd_machine_count_is_said_as_it_is(capsys):
    """`--heterogeneous 2` on 3 machines slows 1 of them (the count rounds down): it said
    'half the machines are 2x slower'."""
    argv = ["select", "--machines", "3", "--gpus-per-machine", "4", "--model", "resnet50",
            "--network-gbps", "25", "--heterogeneous"]  # fmt: skip
    assert main([*argv, "2", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "half the machines" not in out
    assert "(1 of the 3 machines is 2x slower than the rest) and only synchronous steps" in out
    assert main([*argv, "--explain"]) == 0
    assert "without FACTOR): 1 of the 3 machines is assumed 1.5x slower." in (
        capsys.readouterr().out
    )
    assert main(["select", "--machines", "4", "--gpus-per-machine", "4", "--model", "resnet50",
                 "--network-gbps", "25", "--heterogeneous", "2", "--explain"]) == 0  # fmt: skip
    assert "(half the machines are 2x slower than the rest" in capsys.readouterr().out


def test_cli_argparse_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["select", "--machines", "2", "--gpus-per-machine", "8"])  # no --model/--params
    assert info.value.code == 2
    assert "--model" in capsys.readouterr().err


def test_cli_gpu_mix_and_preemption_rate(capsys):
    argv = ["select", "--machines", "8", "--gpus-per-machine", "1", "--gpu", "a100:2,t4:6",
            "--network-gbps", "100", "--model", "resnet101", "--preemptible",
            "--preemptions-per-machine-hour", "0.5", "--json"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["inputs"]["topology"]["gpu_mix"] == [["a100", 2], ["t4", 6]]
    assert doc["inputs"]["topology"]["preemptions_per_machine_hour"] == 0.5
    assert any("0.500 (given) preemptions per machine-hour" in r for r in doc["reasons"])
    assert main(argv[:-3] + ["--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert any("(default: one a day)" in r for r in default["reasons"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--gpu", "a100:2,t4:5"], "names 7 machines but --machines is 8"),
        (["--gpu", "a100:two"], "NAME:MACHINES"),
        (["--gpu", "a100:2,x9:6"], "unknown GPU"),
        (["--gpu", "a100:2,t4:6", "--gpus-per-machine", "16"],
         "no machine holds more than 8 t4 GPUs"),
        (["--gpu", "a100:2,t4:6", "--gpus-per-machine", "2", "--interconnect", "nvlink"],
         "t4 GPUs have no NVLink"),
        (["--gpu", "cpu", "--gpus-per-machine", "500"], "at most one per core"),
        (["--preemptible", "--preemptions-per-machine-hour", "-1"], "a number from 0 up"),
        (["--sparse-embedding-params", "1000", "--embedding-lookups-per-example", "0"],
         "--embedding-lookups-per-example"),
        (["--classes", "1000"], "--classes applies to registry models"),
        (["--embedding-dim", "32"], "--embedding-dim describes a table: give --sparse-embedding"),
        (["--embedding-lookups-per-example", "5"], "give --sparse-embedding-params too"),
    ],
)  # fmt: skip
def test_cli_refuses_bad_mixes_and_rates(argv, message, capsys):
    base = ["select", "--machines", "8", "--gpus-per-machine", "1", "--params", "1000"]
    assert main(base + argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_cli_objective_cost_uses_the_bundled_prices_and_refuses_unpriced_hardware(capsys):
    argv = [
        "select",
        "--machines",
        "2",
        "--gpus-per-machine",
        "8",
        "--gpu",
        "a100",
        "--network-gbps",
        "100",
        "--model",
        "resnet50",
        "--objective",
        "cost",
        "--json",
    ]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["reasons"][0].startswith("Objective cost:")
    assert main(["select", "--machines", "2", "--gpus-per-machine", "1", "--gpu", "cpu",
                 "--params", "1000", "--objective", "cost"]) == 2  # fmt: skip
    assert "--objective cost" in capsys.readouterr().err


def test_compiled_metrics_set_the_scalars_select_charges(capsys):
    """`select --compiled-metrics` reaches the prediction: each metric is 3 more scalar
    all-reduces in every multi-worker step, so the step of two CPU workers grows by 3 rings."""
    base = ["select", "--gpu", "cpu", "--machines", "2", "--gpus-per-machine", "1",
            "--model", "mlp", "--json"]  # fmt: skip

    def multi_worker_step(metrics: int) -> float:
        assert main([*base, "--compiled-metrics", str(metrics)]) == 0
        doc = json.loads(capsys.readouterr().out)
        (row,) = [a for a in doc["alternatives"] if a["strategy"] == "multi_worker_mirrored"]
        return row["predicted"]["step_time_s"]

    one, three = multi_worker_step(1), multi_worker_step(3)
    assert three - one == pytest.approx(2 * 3 * 2 * step_time.CPU_RING_HOP_S, rel=1e-3)
    assert step_time.keras_step_scalar_all_reduces(2) == 9  # a regressor's MAE and RMSE
    with pytest.raises(SystemExit) as refused:
        main([*base, "--compiled-metrics", "-1"])
    assert refused.value.code == 2
    assert "--compiled-metrics: must be 0 to 1,000, got -1" in capsys.readouterr().err


def test_a_registry_model_is_sized_for_its_own_dataset_by_default(capsys):
    """resnet50 and mobilenet_v2 are ImageNet models: 1,000 classes unless --classes says
    otherwise (25,636,712 parameters: Keras' ResNet50 with its ImageNet head)."""
    argv = ["select", "--machines", "1", "--gpus-per-machine", "4", "--model", "resnet50",
            "--json"]  # fmt: skip
    assert main(argv) == 0
    default = json.loads(capsys.readouterr().out)["inputs"]["model"]
    assert default["params"] == 25_636_712 and "1000 classes" in default["source"]
    assert main([*argv, "--classes", "10"]) == 0
    assert json.loads(capsys.readouterr().out)["inputs"]["model"]["params"] < 24_000_000
    assert main(["select", "--machines", "1", "--gpus-per-machine", "1", "--model", "mlp",
                 "--json"]) == 0  # fmt: skip
    assert "10 classes" in json.loads(capsys.readouterr().out)["inputs"]["model"]["source"]
