"""The benchmark scripts' machinery: arguments, shards, the bare model, tables, JSON shape."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmarks import (
    bare_tf,
    checkpointing,
    collective_latency,
    common,
    input_pipeline,
    options,
    overhead,
    pipeline_overhead,
    run_all,
)

SCRIPTS = (
    "overhead",
    "options",
    "input_pipeline",
    "pipeline_overhead",
    "run_all",
    "bare_tf",
    "collective_latency",
    "checkpointing",
)


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_has_help(script):
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{script}", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout


@pytest.mark.parametrize(
    "parse, argv",
    [
        (overhead.parse_args, ["--rounds", "0"]),
        (overhead.parse_args, ["--strategies", "mirrored,bogus"]),
        (overhead.parse_args, ["--epochs", "1"]),
        (input_pipeline.parse_args, ["--steps", "-3"]),
        (pipeline_overhead.parse_args, ["--epochs", "x"]),
        (run_all.parse_args, ["--skip", "nothing"]),
        (options.parse_args, ["--options", "mixed_float64"]),
        (options.parse_args, ["--strategies", "horovod"]),
        (options.parse_args, ["--warmup-rounds", "-1"]),
        (collective_latency.parse_args, ["--steps", "0"]),
        (checkpointing.parse_args, ["--every", "20,0"]),
        (checkpointing.parse_args, ["--every", "ten"]),
        (checkpointing.parse_args, ["--strategies", "parameter_server"]),
    ],
)
def test_bad_arguments_exit_2(parse, argv):
    with pytest.raises(SystemExit) as exit_info:
        parse(argv)
    assert exit_info.value.code == 2


def test_overhead_arguments():
    args = overhead.parse_args(["--rounds", "4", "--steps", "50", "--strategies", "mirrored"])
    assert (args.rounds, args.steps, args.strategies) == (4, 50, ["mirrored"])
    assert args.creator_baseline
    assert overhead.sides_for("parameter_server", True) == ["ours", "bare"]
    assert overhead.sides_for("mirrored", True) == ["ours", "bare", "bare_creator"]


def test_each_option_reaches_the_bare_script_as_its_flag():
    everything = options.OPTIONS["all"]
    assert everything.bare_args("multi_worker_mirrored") == (
        "--precision",
        "mixed_bfloat16",
        "--steps-per-execution",
        "4",
        "--all-reduce",
        "ring",
    )
    assert "--all-reduce" not in everything.bare_args("parameter_server")
    assert options.OPTIONS["jit_compile"].bare_args("one_device") == ("--jit-compile",)
    parsed = bare_tf.parse_args(
        ["--shards", "s", "--strategy", "mirrored", *everything.bare_args("mirrored")]
    )
    assert (parsed.precision, parsed.steps_per_execution, parsed.all_reduce) == (
        "mixed_bfloat16",
        4,
        "reduction_to_one_device",
    )


def test_the_pack_size_reaches_the_trainers_cluster_and_the_bare_scripts_flag():
    packs = options.OPTIONS["all_reduce_pack_mb=0.02"]
    assert packs.cluster("multi_worker_mirrored").all_reduce_pack_mb == 0.02
    flags = packs.bare_args("multi_worker_mirrored")
    assert flags == ("--all-reduce-pack-mb", "0.02")
    parsed = bare_tf.parse_args(["--shards", "s", "--strategy", "multi_worker_mirrored", *flags])
    assert parsed.all_reduce_pack_mb == 0.02
    # the other options keep TensorFlow's one pack on both sides
    assert options.OPTIONS["all"].cluster("multi_worker_mirrored").all_reduce_pack_mb == 0
    assert "--all-reduce-pack-mb" not in options.OPTIONS["all"].bare_args("multi_worker_mirrored")


def test_packs_run_only_where_the_trainer_takes_them():
    packs = options.OPTIONS["all_reduce_pack_mb=0.02"]
    assert options.refusal(packs, "multi_worker_mirrored") is None
    for strategy in ("one_device", "mirrored", "parameter_server"):
        assert "--all-reduce-pack-mb splits the all-reduce of multi_worker_mirrored" in (
            options.refusal(packs, strategy) or ""
        ), strategy


def test_options_the_trainer_refuses_here_are_not_run():
    # XLA compiles no variables of other tasks: refused with the trainer's own reason.
    xla = options.OPTIONS["jit_compile"]
    assert "--jit-compile" in options.refusal(xla, "parameter_server")
    for strategy in ("one_device", "mirrored", "multi_worker_mirrored"):
        assert options.refusal(xla, strategy) is None, strategy
    assert options.refusal(options.OPTIONS["all"], "parameter_server") is None


@pytest.mark.parametrize("precision", ["float32", "mixed_bfloat16"])
def test_bare_model_under_each_precision_is_the_registry_model(precision):
    import tf_keras as keras

    from components.core import models

    keras.mixed_precision.set_global_policy(precision)
    try:
        ours = models.build_model("cnn", (8, 8, 1), 10)
        bare = bare_tf.build_model(keras, "cnn", (8, 8, 1), 10)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert bare.count_params() == ours.count_params()
    assert bare.output.dtype == ours.output.dtype == "float32"


def test_benchmark_shards_are_strategist_shards(tmp_path):
    from components.core import datasets

    manifest = common.make_shards(str(tmp_path / "s"), 96, test_examples=16, num_shards=4)
    again = datasets.load_manifest(str(tmp_path / "s"), verify_records=True)
    assert again.split("train").num_examples == manifest.split("train").num_examples == 96
    assert len(again.file_paths("train")) == 4
    images, labels = next(iter(datasets.make_dataset_fn(again, "train", 8)(None)))
    assert images.shape == (8, 8, 8, 1) and labels.shape == (8,)
    assert float(images.numpy().min()) >= 0.0 and float(images.numpy().max()) <= 1.0
    # Reused, not rewritten, when the counts match.
    stamp = (tmp_path / "s" / datasets.MANIFEST_NAME).stat().st_mtime_ns
    common.make_shards(str(tmp_path / "s"), 96, test_examples=16, num_shards=4)
    assert (tmp_path / "s" / datasets.MANIFEST_NAME).stat().st_mtime_ns == stamp


@pytest.mark.parametrize("name", ["cnn", "mlp"])
def test_bare_model_is_the_registry_model(name):
    import tf_keras as keras

    from components.core import models

    ours = models.build_model(name, (8, 8, 1), 10)
    bare = bare_tf.build_model(keras, name, (8, 8, 1), 10)
    assert bare.count_params() == ours.count_params()
    assert [type(layer) for layer in bare.layers] == [type(layer) for layer in ours.layers]


def test_fit_outside_epochs_reads_both_sides():
    ours = {"phase_seconds": {"fit": 12.5, "epochs": 10.0}, "epoch_seconds": [9.0]}
    bare = {"fit_seconds": 7.0, "epoch_seconds": [3.0, 2.5]}
    assert overhead.fit_outside_epochs(ours) == pytest.approx(2.5)
    assert overhead.fit_outside_epochs(bare) == pytest.approx(1.5)


def test_median_phases_skips_what_a_run_could_not_measure():
    phases = [{"startup": None, "fit": 1.0}, {"startup": 4.0, "fit": 3.0}, {"fit": 2.0}]
    assert overhead.median_phases(phases) == {"startup": 4.0, "fit": 2.0}


def test_summary_table_lists_every_benchmark():
    results = {
        "overhead": {
            "mirrored": {
                "ours": 2.0,
                "bare": 1.0,
                "ratio": 2.0,
                "bare_creator": 2.0,
                "ratio_creator": 1.0,
            }
        },
        "pipeline_overhead": {"skipped": "no compare"},
    }
    text = common.format_table(("b", "m", "v"), run_all.summary_rows(results))
    assert "mirrored: ours / bare" in text and "no compare" in text


def test_pipeline_overhead_exits_3_without_compare(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(
        pipeline_overhead,
        "strategist_command",
        lambda: [sys.executable, "-c", "raise SystemExit(2)"],
    )
    assert pipeline_overhead.main(["--work-dir", str(tmp_path)]) == 3
    assert "not available" in capsys.readouterr().err


@pytest.mark.cluster
def test_tiny_overhead_run_writes_the_promised_json(tmp_path):
    """One round of mirrored, ours and bare, on a few steps (about 30 s)."""
    out = tmp_path / "overhead.json"
    code = overhead.main(
        [
            "--strategies=mirrored",
            "--rounds=1",
            "--steps=20",
            "--epochs=2",
            "--model=mlp",
            "--no-creator-baseline",
            f"--work-dir={tmp_path}",
            f"--output={out}",
        ]
    )
    assert code == 0
    results = json.loads(out.read_text())
    assert set(results) == {"mirrored"}
    record = results["mirrored"]
    assert {"ours", "bare", "ratio", "rounds"} <= set(record)
    assert record["ours"] > 0 and record["bare"] > 0 and record["rounds"] == 1
    assert record["ratio"] == pytest.approx(record["ours"] / record["bare"])
    # Whole-run time of both sides, and where Strategist's went.
    assert record["ours_run_seconds"] > 0 and record["bare_run_seconds"] > 0
    for side in ("ours", "bare"):
        assert record["fit_outside_epochs_seconds_per_round"][side][0] >= 0
    assert record["ours_phase_seconds"]["epochs"] > 0
    assert "fit outside epochs" in overhead.time_table(results)
    # The machine kind the ratio was measured on (the parameter-server gap followed it).
    assert record["machine"]["nproc"] == os.cpu_count()
    assert record["machine"]["cpu_model"]


def _train_step_ops(model, batch: int = 16, steps: int = 4):
    """Op types (with counts) of the train function `fit` traces for `model`, nested ones too."""
    from collections import Counter

    import numpy as np
    import tensorflow as tf

    images = np.zeros((batch * steps, 8, 8, 1), np.float32)
    labels = np.arange(batch * steps) % 10
    data = tf.data.Dataset.from_tensor_slices((images, labels)).batch(batch).repeat()
    model.fit(data, epochs=1, steps_per_epoch=steps, verbose=0)
    ops: Counter[str] = Counter()
    functions = model.train_tf_function._list_all_concrete_functions()
    ops["(traced functions)"] = len(functions)
    for function in functions:
        graph = function.graph.as_graph_def()
        ops.update(node.op for node in graph.node)
        for nested in graph.library.function:
            ops.update(node.op for node in nested.node_def)
    return ops


# What the trainer's learning-rate warm-up adds to each traced train step, per replica: the
# schedule (step + 1, its cast, / warm-up steps, min(1, .), x peak, their constants) and the
# optimizer's assignment and read of the current rate.
WARMUP_OPS = {
    "AddV2": 1,
    "Cast": 1,
    "RealDiv": 1,
    "Minimum": 1,
    "Mul": 1,
    "Const": 4,
    "AssignVariableOp": 1,
    "ReadVariableOp": 1,
}


def test_trainer_and_bare_script_train_the_same_graph_under_the_options():
    """The trainer's train step is the bare script's, op for op, but for the warm-up schedule.

    Under mixed_bfloat16 with 4 steps per execution: the same layer dtypes
    (bfloat16 compute, float32 variables and logits), the same casts, the same
    optimizer and loop, the same number of traces, so the options benchmark
    compares like with like (docs/benchmarks.md, section 5).
    """
    import argparse
    from collections import Counter

    import tensorflow as tf
    import tf_keras as keras

    from components.core import model_build, models
    from components.core.config import RunConfig, TrainingConfig
    from components.core.input_spec import FeatureSpec, InputSpec, LabelSpec

    option = {"precision": "mixed_bfloat16", "steps_per_execution": 4}
    spec = InputSpec({"image": FeatureSpec((8, 8, 1))}, LabelSpec(num_classes=10))
    config = RunConfig(training=TrainingConfig(warmup_epochs=1, **option))
    bare_args = argparse.Namespace(
        learning_rate=0.002, steps_per_execution=option["steps_per_execution"], jit_compile=False
    )
    try:
        ours = model_build.build_compiled(
            config,
            spec,
            models.builtin("cnn"),
            strategy=tf.distribute.get_strategy(),
            batch_per_update=16,
        ).model
        keras.mixed_precision.set_global_policy(option["precision"])
        bare = bare_tf.build_model(keras, "cnn", (8, 8, 1), 10)
        bare_tf.compile_model(keras, bare, bare_args)
    finally:
        keras.mixed_precision.set_global_policy("float32")

    def layout(model):
        return [
            (type(layer).__name__, layer.compute_dtype, layer.variable_dtype)
            for layer in model.layers
            if not isinstance(layer, keras.layers.InputLayer)
        ]

    assert layout(ours) == layout(bare)
    assert layout(ours)[0] == ("Conv2D", "bfloat16", "float32")
    assert ours.output.dtype == bare.output.dtype == "float32"
    ours_ops, bare_ops = _train_step_ops(ours), _train_step_ops(bare)
    traced = bare_ops["(traced functions)"]
    assert not bare_ops - ours_ops
    assert ours_ops - bare_ops == Counter({op: n * traced for op, n in WARMUP_OPS.items()})


@pytest.mark.parametrize("workers", ["1", "2,x", ""])
def test_collective_latency_needs_two_or_more_workers(workers, capsys):
    assert collective_latency.main(["--workers", workers]) == 2
    assert "--workers" in capsys.readouterr().err


@pytest.mark.cluster
def test_collective_latency_times_a_real_two_worker_ring(tmp_path):
    """Two real CPU workers all-reduce over gRPC; a step is two ring hops (about 15 s)."""
    from components.core.selection.step_time import CPU_RING_HOP_S

    out = tmp_path / "latency.json"
    code = collective_latency.main(["--workers", "2", "--steps", "30", f"--output={out}"])
    assert code == 0
    doc = json.loads(out.read_text())
    (result,) = doc["results"]
    assert result["workers"] == 2 and result["tensors"] == 6
    assert result["step_ms"] > result["base_ms"] > 0
    assert result["hop_ms"] == pytest.approx((result["step_ms"] - result["base_ms"]) / 2)
    # a gRPC call, not an NCCL send: within a wide band of the model's figure
    assert 0.1 * CPU_RING_HOP_S * 1e3 < result["hop_ms"] < 20 * CPU_RING_HOP_S * 1e3
    assert doc["model_hop_ms"] == pytest.approx(CPU_RING_HOP_S * 1e3)
    assert doc["machine"]["nproc"] == os.cpu_count()
