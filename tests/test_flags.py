"""Every flag of `train` and `compare` reaches the trainer, or is refused: none is dropped."""

from __future__ import annotations

import argparse
import json
import shlex

import pytest

from components.core.config import RunConfig, cluster_from_dict
from pipelines.cli import build_parser, main
from pipelines.cli.compare import pipeline_arguments

# Flags that set the run (RunConfig), with a non-default value and where it lands.
RUN_FLAGS = {
    "--dataset": ("digits", "data.dataset"),  # the only offline dataset; others in test_datasets
    "--data-dir": ("{tfds}", "data.data_dir"),
    "--num-shards": ("4", "data.num_shards"),
    "--model": ("cnn", "model.name"),
    "--epochs": ("2", "training.epochs"),
    "--learning-rate": ("0.002", "training.base_learning_rate"),
    "--warmup-epochs": ("0", "training.warmup_epochs"),
    "--validation-fraction": ("0.1", "training.validation_fraction"),
    "--seed": ("7", "training.seed"),
    "--strategy": ("parameter_server", "cluster.strategy"),
    "--workers": ("3", "cluster.workers"),
    "--ps": ("2", "cluster.ps"),
}
# Flags shown on a second run, since a parameter_server rehearsal takes one device per
# worker: (value, path, expected value in the config).
MIRRORED_FLAGS = {
    "--strategy": ("mirrored", "cluster.strategy", "mirrored"),
    "--gpus-per-machine": ("3", "cluster.gpus_per_machine", 3),
    # 3 devices = 3 replicas: a global batch of 48 is 16 per replica.
    "--global-batch-size": ("48", "training.per_replica_batch_size", 16),
    # Reduction over logical CPU devices (nccl and hierarchical_copy need GPUs).
    "--all-reduce": ("reduction_to_one_device", "cluster.all_reduce", "reduction_to_one_device"),
}
# Speed flags, shared by `train` and `compare`: (value, None for a bare switch; path;
# expected value in the config). Real clusters that run them: tests/test_cluster_training.py
# (test_multi_worker_mirrored_learns_in_bfloat16..., test_xla_learns_in_bfloat16...).
SPEED_FLAGS = {
    "--precision": ("mixed_bfloat16", "training.precision", "mixed_bfloat16"),
    "--jit-compile": (None, "training.jit_compile", True),
    "--steps-per-execution": ("3", "training.steps_per_execution", 3),
    # A trace in the TensorBoard logs: tests/test_cli_train.py.
    "--profile-steps": ("2,4", "training.profile_steps", "2,4"),
    # What it changes in real clusters: tests/test_preemption.py.
    "--checkpoint-every": ("20", "training.checkpoint_every", "20"),
}
# Data flags beside --dataset (--data excludes it): value (formatted with {csv} and
# {module}), path, expected value in the config. Real runs on files: tests/test_user_data.py.
DATA_FLAGS = {
    "--data": ("{csv}", "data.files", "{csv}"),
    "--label": ("target", "data.label", "target"),
    "--test-fraction": ("0.25", "data.test_fraction", 0.25),
    "--dataset-module": ("{module}", "data.dataset_module", "{module}"),
    "--feature-spec": (None, "data.feature_spec", None),  # .tfrecord only: test_user_data.py
}
# Flags that are not part of a run's settings, and what they do instead.
OTHER_FLAGS = {
    "--help": "prints help",
    "--local": "the default backend, named",
    "--output": "the output folder (RunConfig.output_dir); tested here too",
    "--restarts": "the launcher's restart policy (tests/test_faults.py)",
    "--allow-network-exposure": "runs a cluster without a namespace (test_network_isolation.py)",
    "--oversubscribe": "lifts the machine-size bound (tests/test_bad_input.py)",
    "--stall-timeout": "the launcher's liveness check (tests/test_faults.py: "
    "test_strategist_train_stall_timeout_fails_a_run_stopped_before_its_first_epoch, and "
    "test_the_stall_timeout_reaches_the_launcher for 0 and the default)",
    "--overwrite": "replaces a finished run in --output (tests/test_run_folder.py)",
    "--shards-dir": "trains on given shards (data.shards_dir; tests/test_bad_input.py)",
    "--batch-size": "excludes --global-batch-size; both set training.per_replica_batch_size",
    "--evaluator": "cluster.evaluator: an evaluator task (tests/test_evaluator.py; "
    "real runs with the flag: tests/test_rehearsal.py)",
    "--no-scale-learning-rate": "training.scale_learning_rate = False: the rate kept at any "
    "batch (test_model_module.py::test_the_learning_rate_flags_reach_the_module_optimizer)",
    "--model-module": "model.module and model.name; excludes --model (tests/test_model_module.py)",
    "--devices": "the older name of --gpus-per-machine, hidden (test_one_name_one_meaning...)",
    "--all-reduce-pack-mb": "cluster.all_reduce_pack_mb, multi_worker_mirrored's packs "
    "(test_all_reduce_pack_mb_reaches_the_cluster_config here; a real 2-worker step: "
    "test_step_time.py::test_strategists_multi_worker_mirrored_all_reduces_...)",
}
# `compare` only: the strategies it runs and the target hardware it records a
# recommendation for (not run settings); the rest are the shared run flags.
COMPARE_FLAGS = {
    "--strategies": "becomes the pipeline's clusters",
    "--target-accuracy": "the old name of --target-value",
    "--target-value": "the comparison's time-to-target value (tests/test_comparison.py; "
    "real runs with the flag: tests/test_model_module.py)",
    "--target-metric": "the metric of the time-to-target and the winner (tests/test_comparison.py)",
    # Target hardware of the recorded recommendation: the pipeline's parameters of the same
    # names (test_every_compare_flag_reaches_the_pipelines_run_config here).
    "--gpu": "target hardware of the recorded recommendation",
    "--machines": "target hardware of the recorded recommendation",
    "--network-gbps": "target hardware of the recorded recommendation",
    "--verbose": "shows OUTPUT/pipeline.log live (tests/test_local_console.py)",
    "--repeats": "the pipeline's repeats: each strategy trains N times "
    "(tests/test_local_pipeline.py)",
    "--max-steps": "the pipeline's max_steps: each strategy's pilot stops at N steps "
    "(tests/test_pilot.py)",
    # The price: the pipeline's parameters of the same names, which price every run of the
    # comparison record (test_compare_flags_reach_the_comparison_record).
    "--preemptible": "Spot prices and expected preemption losses (tests/test_spot_pricing.py)",
    "--preemptions-per-machine-hour": "the expected preemption rate of the price "
    "(tests/test_spot_pricing.py)",
    "--prices": "the price table of every cost (tests/test_spot_pricing.py)",
}


# Flags whose entry above names the test of what they drive, but no test passes the flag
# itself (checked: none of the named files holds it, so a new test must take it off here).
NO_TEST_PASSES_THE_FLAG = {"--verbose"}


def flags_of(command: str) -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {
        flag
        for action in sub.choices[command]._actions
        for flag in action.option_strings
        if flag.startswith("--")
    }


def field(config: dict, path: str):
    for part in path.split("."):
        config = config[part]
    return config


def cloud_flags() -> set[str]:
    """`train --target` flags: they set the CloudConfig (tests/test_cloud_config.py)."""
    parser = argparse.ArgumentParser()
    from pipelines.cli import cloud_train

    cloud_train.add_cloud_arguments(parser)
    return {f for a in parser._actions for f in a.option_strings if f.startswith("--")}


def test_every_train_flag_has_a_known_destination():
    known = {*RUN_FLAGS, *MIRRORED_FLAGS, *SPEED_FLAGS, *OTHER_FLAGS, *DATA_FLAGS, *cloud_flags()}
    unknown = flags_of("train") - known
    assert not unknown, f"say where these flags go (and test it): {sorted(unknown)}"


def test_every_compare_flag_has_a_known_destination():
    known = {*RUN_FLAGS, *MIRRORED_FLAGS, *SPEED_FLAGS, *OTHER_FLAGS, *COMPARE_FLAGS, *DATA_FLAGS}
    known -= {"--strategy"}
    unknown = flags_of("compare") - known - {"--restarts", "--shards-dir"}
    assert not unknown, f"say where these flags go (and test it): {sorted(unknown)}"


def train_for_real(tmp_path, name: str, flags: dict[str, str]) -> tuple[dict, dict]:
    """Runs `strategist train --local` with `flags`; returns its config.json and metrics.json."""
    out = tmp_path / name
    argv = ["train", "--local", "--output", str(out)]
    for flag, value in flags.items():
        argv += [flag, value]
    assert main(argv) == 0
    saved = json.loads((out / "config.json").read_text())
    metrics = json.loads((out / "metrics.json").read_text())
    assert saved["output_dir"] == str(out)
    assert metrics["run_config"] == saved  # the record holds the config that ran
    return saved, metrics


def test_every_test_file_an_entry_names_exists_and_passes_the_flag():
    """An entry's "(tests/test_x.py)" is a claim: the file exists and one it names holds the
    flag (outside test_flags.py, which names every flag)."""
    import re
    from pathlib import Path

    tests = Path(__file__).resolve().parent
    named = re.compile(r"(?:tests/)(test_\w+)(?:\.py)?|\b(test_\w+)\.py")
    checked = 0
    for flag, text in {**OTHER_FLAGS, **COMPARE_FLAGS}.items():
        files = [tests / f"{a or b}.py" for a, b in named.findall(text)]
        if not files:
            continue
        checked += 1
        missing = [f.name for f in files if not f.exists()]
        assert not missing, f"{flag}: no such test file {missing}"
        spelled = re.compile(re.escape(flag) + r"(?![\w-])")
        passing = [f.name for f in files if spelled.search(f.read_text())]
        if flag in NO_TEST_PASSES_THE_FLAG:
            assert not passing, f"{flag} is in {passing}: take it off NO_TEST_PASSES_THE_FLAG"
        else:
            assert passing, f"{flag}: none of {[f.name for f in files]} passes it"
    assert checked >= 10  # the entries above that name a file


@pytest.mark.cluster
def test_every_train_flag_reaches_the_trainers_config(tmp_path):
    """Real runs with every run flag changed from its default."""
    tfds = tmp_path / "tfds"
    tfds.mkdir()
    flags = {flag: value.format(tfds=tfds) for flag, (value, _) in RUN_FLAGS.items()}
    saved, metrics = train_for_real(tmp_path, "ps", flags)
    for flag, value in flags.items():
        expected = json.loads(value) if value[0].isdigit() else value
        assert field(saved, RUN_FLAGS[flag][1]) == expected, flag
    assert (metrics["workers"], metrics["ps"], len(metrics["epoch_seconds"])) == (3, 2, 2)
    assert metrics["hardware"]["processes"] == 6  # chief + 3 workers + 2 ps ran

    flags = {flag: value for flag, (value, _, _) in MIRRORED_FLAGS.items()}
    saved, metrics = train_for_real(tmp_path, "mirrored", flags)
    for flag, (_, path, expected) in MIRRORED_FLAGS.items():
        assert field(saved, path) == expected, flag
    # The devices are real: 3 logical CPU devices hold 3 replicas in sync.
    assert metrics["replicas_in_sync"] == 3 and metrics["global_batch_size"] == 48
    assert metrics["hardware"]["logical_devices_per_machine"] == 3


def test_every_compare_flag_reaches_the_pipelines_run_config(tmp_path):
    tfds = tmp_path / "tfds"
    tfds.mkdir()
    argv = ["compare", "--strategies", "mirrored,multi_worker_mirrored,parameter_server"]
    shared = {k: v for k, v in RUN_FLAGS.items() if not v[1].startswith("cluster.")}
    for flag, (value, _) in shared.items():
        argv += [flag, value.format(tfds=tfds)]
    argv += ["--batch-size", "16", "--ps", "2", "--repeats", "3"]
    argv += ["--machines", "4", "--gpu", "a100", "--network-gbps", "25"]
    args = build_parser().parse_args(argv)
    arguments = pipeline_arguments(args)
    assert arguments["repeats"] == 3  # the pipeline's parameter of the same name
    # The target hardware of the recorded recommendation (defaults: 1, t4, 10).
    assert (arguments["machines"], arguments["gpu"], arguments["network_gbps"]) == (4, "a100", 25)
    config = arguments["run_config"]
    for flag, (value, path) in shared.items():
        expected = json.loads(value) if value[0].isdigit() else value.format(tfds=tfds)
        assert field(config, path) == expected, flag
    assert config["training"]["per_replica_batch_size"] == 16
    clusters = [cluster_from_dict(c) for c in arguments["clusters"]]
    assert [c.strategy for c in clusters] == [
        "mirrored",
        "multi_worker_mirrored",
        "parameter_server",
    ]
    assert [(c.workers, c.ps) for c in clusters] == [(1, 0), (2, 0), (2, 2)]
    # No --gpus-per-machine: 2 under mirrored, else 1; the recommendation's, mirrored's.
    assert [c.gpus_per_machine for c in clusters] == [2, 1, 1]
    assert arguments["gpus_per_machine"] == 2
    # Each strategy's cluster travels in `clusters`, none in the shared run config; the
    # train step joins them (launch.train_to_artifacts) and gets back exactly what was sent.
    assert "cluster" not in config
    for sent in arguments["clusters"]:
        joined = RunConfig.from_dict({**config, "cluster": sent}).to_pipeline_parameter()
        assert joined == {**config, "cluster": sent}


@pytest.mark.parametrize("command", ["train", "compare"])
def test_every_data_flag_lands_in_the_run_config(command, tmp_path):
    from pipelines.cli import common

    csv = tmp_path / "rows.csv"
    csv.write_text("a,b,target\n" + "".join(f"{i},{i * 2},{i % 2}\n" for i in range(20)))
    module = tmp_path / "builders.py"
    module.write_text("X = 1\n")
    values = {"csv": str(csv), "module": str(module)}
    argv = [command]
    for flag, (value, _, _) in DATA_FLAGS.items():
        if value is not None:
            argv += [flag, value.format(**values)]
    args = build_parser().parse_args(argv)
    if command == "train":
        config = common.build_run_config(args, "mirrored", "out").to_dict()
    else:
        config = pipeline_arguments(args)["run_config"]
    for flag, (_, path, expected) in DATA_FLAGS.items():
        if expected is not None:
            expected = expected.format(**values) if isinstance(expected, str) else expected
            assert field(config, path) == expected, flag
    assert field(config, "data.dataset") == "rows"  # the files' name, for reports


def speed_argv() -> list[str]:
    argv = []
    for flag, (value, _, _) in SPEED_FLAGS.items():
        argv += [flag] if value is None else [flag, value]
    return argv


@pytest.mark.parametrize("command", ["train", "compare"])
def test_every_speed_flag_lands_in_the_run_config(command):
    """One switch each, off by default: the run config (and so every trainer) holds it."""
    from pipelines.cli import common

    # one_device: the strategy XLA can run on this machine without GPUs.
    strategy = "--strategy" if command == "train" else "--strategies"
    args = build_parser().parse_args([command, strategy, "one_device", *speed_argv()])
    if command == "train":
        config = common.build_run_config(args, args.strategy, "out").to_dict()
    else:
        config = pipeline_arguments(args)["run_config"]
    default = RunConfig().to_dict()
    for flag, (_, path, expected) in SPEED_FLAGS.items():
        assert field(config, path) == expected != field(default, path), flag


def test_compare_gives_all_reduce_to_the_strategies_that_take_it():
    argv = ["compare", "--strategies", "mirrored,parameter_server"]
    args = build_parser().parse_args([*argv, "--all-reduce", "reduction_to_one_device"])
    clusters = [cluster_from_dict(c) for c in pipeline_arguments(args)["clusters"]]
    assert [c.all_reduce for c in clusters] == ["reduction_to_one_device", "auto"]


def test_compare_refuses_what_it_cannot_pass_on(capsys):
    code = main(["compare", "--global-batch-size", "64"])
    assert code == 2
    assert "--global-batch-size does not fit a comparison" in capsys.readouterr().err


def _subcommand_parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def _action(command: str, flag: str) -> argparse.Action:
    return next(a for a in _subcommand_parsers()[command]._actions if flag in a.option_strings)


def test_every_flag_of_every_command_is_documented():
    """README.md or docs/*.md name every flag a `--help` shows."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    docs = "".join(p.read_text() for p in [root / "README.md", *sorted(root.glob("docs/*.md"))])
    for command, parser in _subcommand_parsers().items():
        shown = {
            flag
            for action in parser._actions
            if action.help != argparse.SUPPRESS
            for flag in action.option_strings
            if flag.startswith("--")
        }
        missing = sorted(f for f in shown if not re.search(re.escape(f) + r"(?![\w-])", docs))
        assert not missing, f"document these `{command}` flags: {missing}"


def test_every_help_ends_with_examples():
    parsers = {"strategist": build_parser(), **_subcommand_parsers()}
    for command, parser in parsers.items():
        text = parser.format_help()
        assert "\nexamples:\n  strategist " in text, command
        examples = text.split("\nexamples:\n", 1)[1]
        # Each example is kept whole on its line (not re-wrapped) and parses.
        lines = [line for line in examples.splitlines() if line.startswith("  strategist ")]
        prefix = "  strategist " if command == "strategist" else f"  strategist {command}"
        assert lines and all(line.startswith(prefix) for line in lines)
        for line in lines:
            build_parser().parse_args(shlex.split(line)[1:])


def _help_examples(command: str) -> list[list[str]]:
    """The argv of each `strategist COMMAND` example line in COMMAND's --help."""
    text = _subcommand_parsers()[command].format_help().split("\nexamples:\n", 1)[1]
    return [shlex.split(line)[1:] for line in text.splitlines() if line.startswith("  strategist ")]


def test_help_examples_pass_the_input_checks(tmp_path, monkeypatch):
    # Parsing is not enough: an example's --image must pass check_image, and compile's
    # examples must really compile (into tmp_path), so a broken example fails here.
    from pipelines.compile import check_image

    for command in _subcommand_parsers():
        for argv in _help_examples(command):
            if "--image" in argv:
                check_image(argv[argv.index("--image") + 1])
    monkeypatch.chdir(tmp_path)
    for argv in _help_examples("compile"):
        assert main(argv) == 0, argv
        assert (tmp_path / argv[argv.index("-o") + 1]).stat().st_size > 0


def test_one_name_one_meaning_one_default_across_commands():
    # The GPU recommended for: select, compare and the pipelines' `gpu` agree.
    from pipelines.comparison import build_comparison_pipeline
    from pipelines.training import build_training_pipeline

    assert _action("select", "--gpu").default == _action("compare", "--gpu").default == "t4"
    for build in (build_training_pipeline, build_comparison_pipeline):
        params = build().pipeline_spec.root.input_definitions.parameters
        assert params["gpu"].default_value.string_value == "t4"
    # Examples per replica per step, the same default everywhere.
    batch = {c: _action(c, "--batch-size").default for c in ("train", "compare", "select")}
    assert set(batch.values()) == {RunConfig().training.per_replica_batch_size}, batch
    # GPUs per machine: one shown name and one value wherever it exists; the older names
    # (`--devices` of train and compare, `--gpus` of the pipeline commands) parse, hidden.
    for command in ("train", "compare", "select", "compile", "submit", "schedule"):
        gpus = _action(command, "--gpus-per-machine")
        assert gpus.option_strings == ["--gpus-per-machine"] and gpus.dest == "gpus_per_machine"
        assert gpus.help != argparse.SUPPRESS
    pipeline = ["--pipeline", "training", "--target", "vertex"]
    older = {
        ("train", "--devices"): [],
        ("compare", "--devices"): [],
        ("compile", "--gpus"): [*pipeline, "-o", "x.yaml"],
        ("submit", "--gpus"): pipeline,
        ("schedule", "--gpus"): [*pipeline, "--cron", "0 3 * * *"],
    }
    for (command, name), required in older.items():
        assert _action(command, name).help == argparse.SUPPRESS, (command, name)
        for spelling in (name, "--gpus-per-machine"):
            args = build_parser().parse_args([command, *required, spelling, "3"])
            assert args.gpus_per_machine == 3, (command, spelling)
    # One default rule where the strategy is known (train, compare: in
    # test_every_compare_flag_reaches_the_pipelines_run_config): 2 under mirrored, else 1;
    # 1 for a pipeline's train step, whose strategy is chosen when the pipeline runs.
    from pipelines.cli import common

    for strategy, devices in [("mirrored", 2), ("one_device", 1), ("parameter_server", 1)]:
        args = build_parser().parse_args(["train", "--strategy", strategy])
        assert common.build_run_config(args, strategy, "out").cluster.gpus_per_machine == devices
    for command in ("compile", "submit", "schedule"):
        assert _action(command, "--gpus-per-machine").default == 1
    # --target: the same choices everywhere, `kfp` accepted as `kubeflow`.
    for command in ("train", "compile", "submit", "schedule"):
        target = _action(command, "--target")
        assert tuple(target.choices) == ("vertex", "kubeflow") and target.type("kfp") == "kubeflow"
    # No shown flag that does nothing: compare's --local (older scripts) is accepted, not shown.
    assert _action("compare", "--local").help == argparse.SUPPRESS
    assert build_parser().parse_args(["compare", "--local"]).local is True


CLOUD = [
    "--project", "my-project", "--region", "us-central1", "--image",
    "us-docker.pkg.dev/proj/strategist/strategist-trainer:1", "--output", "gs://bucket/runs/x",
    "--shards-dir", "gs://bucket/shards/digits", "--job-name", "gpus", "--dry-run",
]  # fmt: skip


def _requested_gpus(target: str, request: str) -> tuple[int, int]:
    """The chief's GPUs in a printed dry-run request, and the devices its RunConfig says."""
    if target == "vertex":
        pool = json.loads(request)["jobSpec"]["workerPoolSpecs"][0]
        args = pool["containerSpec"]["args"]
        gpus = pool["machineSpec"].get("acceleratorCount", 0)
    else:
        import yaml

        pod = yaml.safe_load(request)["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]
        (container,) = pod["containers"]
        args = container["args"]
        gpus = int(container.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0))
    return gpus, json.loads(args[1])["cluster"]["gpus_per_machine"]


@pytest.mark.parametrize("target", ["vertex", "kubeflow"])
def test_train_gpus_per_machine_sets_the_local_cluster_and_the_cloud_job_alike(target, capsys):
    """`train`'s one flag: the local cluster's devices, and the job's GPUs per machine."""
    from pipelines.cli import common

    args = build_parser().parse_args(["train", "--strategy", "mirrored", "--gpus-per-machine", "3"])
    cluster = common.build_run_config(args, args.strategy, "out").cluster
    assert (cluster.gpus_per_machine, cluster.num_replicas) == (3, 3)  # a real run: above
    # The same flag in the request (T4 machines take 1, 2 or 4 GPUs, so 4 here).
    cloud = ["train", "--target", target, *CLOUD, "--gpu", "t4"]
    requests = {}
    for spelling in ("--gpus-per-machine", "--devices"):
        assert main([*cloud, "--strategy", "mirrored", spelling, "4"]) == 0
        requests[spelling] = capsys.readouterr().out
    assert requests["--devices"] == requests["--gpus-per-machine"]  # the older name, the same
    assert _requested_gpus(target, requests["--gpus-per-machine"]) == (4, 4)
    # Its default, the same rule as locally: 2 under mirrored, else 1.
    for strategy, gpus in [("mirrored", 2), ("multi_worker_mirrored", 1)]:
        assert main([*cloud, "--strategy", strategy]) == 0
        assert _requested_gpus(target, capsys.readouterr().out) == (gpus, gpus), strategy


def test_all_reduce_pack_mb_reaches_the_cluster_config_and_only_multi_worker_mirrored_takes_it():
    from pipelines.cli.common import build_run_config

    parser = build_parser()
    args = parser.parse_args(["train", "--local", "--strategy", "multi_worker_mirrored",
                              "--all-reduce-pack-mb", "4"])  # fmt: skip
    config = build_run_config(args, args.strategy, "out")
    assert config.cluster.all_reduce_pack_mb == 4.0
    assert RunConfig.from_dict(config.to_dict()).cluster.all_reduce_pack_mb == 4.0
    # compare gives it to multi_worker_mirrored alone
    argv = ["compare", "--local", "--strategies", "mirrored,multi_worker_mirrored"]
    args = parser.parse_args([*argv, "--all-reduce-pack-mb", "4"])
    from pipelines.cli.compare import _clusters

    assert [c.all_reduce_pack_mb for c in _clusters(args)] == [0.0, 4.0]


def test_every_gpu_flag_lists_the_same_gpus():
    """One list of GPU types in every command's --help: the hardware table's."""
    from components.core.hardware import GPUS

    listed = ", ".join(GPUS)
    helps = {
        command: action.help
        for command, parser in _subcommand_parsers().items()
        for action in parser._actions
        if "--gpu" in action.option_strings
    }
    assert {"train", "compare", "select", "submit", "schedule", "compile"} <= set(helps)
    assert all(listed in text for text in helps.values()), helps
