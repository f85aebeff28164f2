"""Bad input, across the `strategist` subcommands: exit 2, a message that says what to do,
and nothing started or written.

tests/test_cli_train.py holds the first twelve `train` cases (unknown strategy,
model and dataset, impossible cluster shapes...); this matrix adds the rest:
numbers out of range, flag clashes, datasets that are not image classifiers,
existing shards that are missing, truncated, corrupted or do not match their
manifest, shards that cannot feed the cluster, and the other subcommands.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from components.core.config import ConfigError
from pipelines import cli
from tests.conftest import trainer_pids
from tests.test_model_module import GOOD_MODEL


@dataclass(frozen=True)
class Case:
    """One refused command line.

    Attributes:
        argv: the arguments; `{out}` is the output path (which must not appear),
            `{tmp}` a scratch folder, `{shards}` a private copy of the digits
            shards (after `damage` is applied to it).
        message: what the error line must say.
        damage: name of a function below that spoils the shards copy.
    """

    argv: tuple[str, ...]
    message: str
    damage: str | None = None


def train(*argv: str, message: str, damage: str | None = None) -> Case:
    return Case(("train", "--local", "--output", "{out}", *argv), message, damage)


def shards(*argv: str, message: str, damage: str | None = None) -> Case:
    return train("--shards-dir", "{shards}", *argv, message=message, damage=damage)


# -- ways to spoil a shards folder ------------------------------------------------------


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def _first_shard(folder: Path) -> Path:
    return folder / _manifest(folder)["splits"]["train"]["files"][0]["path"]


def no_manifest(folder: Path) -> None:
    (folder / "manifest.json").unlink()


def manifest_not_json(folder: Path) -> None:
    (folder / "manifest.json").write_text('{"dataset": "digits", "splits": ')


def manifest_without_label(folder: Path) -> None:
    manifest = _manifest(folder)
    del manifest["label"]
    (folder / "manifest.json").write_text(json.dumps(manifest))


def counts_do_not_add_up(folder: Path) -> None:
    manifest = _manifest(folder)
    manifest["splits"]["train"]["num_examples"] += 5
    (folder / "manifest.json").write_text(json.dumps(manifest))


def record_count_differs(folder: Path) -> None:
    """The manifest moves one example between two files: totals agree, files do not."""
    manifest = _manifest(folder)
    files = manifest["splits"]["train"]["files"]
    files[0]["num_examples"] += 1
    files[1]["num_examples"] -= 1
    (folder / "manifest.json").write_text(json.dumps(manifest))


def shard_missing(folder: Path) -> None:
    _first_shard(folder).unlink()


def shard_truncated(folder: Path) -> None:
    path = _first_shard(folder)
    path.write_bytes(path.read_bytes()[:-100])


def shard_corrupted(folder: Path) -> None:
    """Same size, flipped bytes in the middle: only reading the records finds it."""
    path = _first_shard(folder)
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 16] = bytes(b ^ 0xFF for b in data[middle : middle + 16])
    path.write_bytes(bytes(data))


def _rewrite_manifest(folder: Path, change) -> None:
    manifest = _manifest(folder)
    change(manifest)
    (folder / "manifest.json").write_text(json.dumps(manifest))


def _unregistered(manifest: dict) -> None:
    """A name TFDS does not know: only the records can show the manifest lies."""
    manifest["dataset"] = manifest["source"]["dataset"] = "my_digits"


def manifest_image_shape_lies(folder: Path) -> None:
    _rewrite_manifest(folder, lambda m: m["features"]["image"].update(shape=[28, 28, 1]))


def manifest_image_shape_lies_unregistered(folder: Path) -> None:
    def change(m):
        _unregistered(m)
        m["features"]["image"]["shape"] = [64]

    _rewrite_manifest(folder, change)


def manifest_num_classes_lies(folder: Path) -> None:
    _rewrite_manifest(folder, lambda m: m["label"].update(num_classes=5, classes=[]))


def manifest_label_range_lies_unregistered(folder: Path) -> None:
    def change(m):
        _unregistered(m)
        m["label"].update(num_classes=5, classes=[])

    _rewrite_manifest(folder, change)


def manifest_num_classes_not_a_count(folder: Path) -> None:
    _rewrite_manifest(folder, lambda m: m["label"].update(num_classes="ten"))


def manifest_names_another_dataset(folder: Path) -> None:
    _rewrite_manifest(folder, lambda m: m.update(dataset="mnist", source={"dataset": "mnist"}))


def manifest_feature_key_lies_unregistered(folder: Path) -> None:
    def change(m):
        _unregistered(m)
        m["features"]["image"]["key"] = "pixels"

    _rewrite_manifest(folder, change)


def manifest_path_leaves_the_folder(folder: Path) -> None:
    """A shard path outside the folder (the probe's): never read, whatever its size."""
    _rewrite_manifest(
        folder, lambda m: m["splits"]["train"]["files"][0].update(path="../../../etc/hostname")
    )


def manifest_record_format_unknown(folder: Path) -> None:
    _rewrite_manifest(folder, lambda m: m.update(record_format="parquet"))


DAMAGE = {
    f.__name__: f
    for f in (
        manifest_record_format_unknown,
        manifest_path_leaves_the_folder,
        manifest_image_shape_lies,
        manifest_image_shape_lies_unregistered,
        manifest_num_classes_lies,
        manifest_label_range_lies_unregistered,
        manifest_num_classes_not_a_count,
        manifest_names_another_dataset,
        manifest_feature_key_lies_unregistered,
        no_manifest,
        manifest_not_json,
        manifest_without_label,
        counts_do_not_add_up,
        record_count_differs,
        shard_missing,
        shard_truncated,
        shard_corrupted,
    )
}

# -- the matrix -------------------------------------------------------------------------

CASES = {
    # numbers out of range and flag clashes
    "restarts-negative": train("--restarts", "-1", message="--restarts: must be 0 to 100"),
    "pack-negative": train("--all-reduce-pack-mb", "-1", message="must be 0 or a positive number"),
    "pack-under-mirrored": train(
        "--strategy", "mirrored", "--all-reduce-pack-mb", "4",
        message="--all-reduce-pack-mb splits the all-reduce of multi_worker_mirrored, not mirrored",
    ),
    "epochs-not-a-number": train("--epochs", "ten", message="'ten' is not a whole number"),
    "workers-negative": train(
        "--strategy", "multi_worker_mirrored", "--workers", "-1",
        message="--workers must be at least 1",
    ),
    "ps-negative": train(
        "--strategy", "parameter_server", "--ps", "-1", message="--ps must be 0 or more"
    ),
    "learning-rate-zero": train("--learning-rate", "0", message="must be a positive number"),
    "num-shards-zero": train("--num-shards", "0", message="--num-shards: must be at least 1"),
    "global-batch-zero": train("--global-batch-size", "0", message="must be at least 1"),
    "batch-and-global-batch": train(
        "--batch-size", "4", "--global-batch-size", "8", message="not allowed with argument"
    ),
    "unknown-flag": train("--gpus", "8", message="unrecognized arguments: --gpus"),
    # cluster shapes and batches the strategy cannot use
    "one-device-with-workers": train(
        "--strategy", "one_device", "--workers", "2", message="runs on one machine"
    ),
    "global-batch-over-ps-workers": train(
        "--strategy", "parameter_server", "--workers", "2", "--global-batch-size", "7",
        message="use a multiple of 2",
    ),
    "global-batch-over-mirrored-devices": train(
        "--strategy", "mirrored", "--gpus-per-machine", "4", "--global-batch-size", "6",
        message="use a multiple of 4",
    ),
    "output-is-a-file": train("--output", "{tmp}/a-file", message="is a file: pass a folder"),
    # datasets a model cannot take (builders that need no download to inspect)
    "dataset-without-label": train(
        "--dataset", "wider_face", "--data-dir", "{tmp}",
        message="has no supervised (input, label) keys: pass --label NAME",
    ),
    "text-dataset-for-the-built-in-mlp": train(
        "--dataset", "imdb_reviews", "--data-dir", "{tmp}",
        message="--model mlp takes one numeric input, the data has text (string)",
    ),
    # a TFDS name that is a path (tfds.builder's 87-line traceback), a cloud flag run locally
    "dataset-a-relative-path": train(
        "--dataset", "../../../../etc", message="is a path but no prepared dataset folder"
    ),
    "dataset-a-file": train(
        "--dataset", "/etc/passwd", message="is a path but no prepared dataset folder"
    ),
    "ps-machine-type-on-a-local-run": train(
        "--ps-machine-type", "n1-standard-4", message="--ps-machine-type apply to cloud runs"
    ),
    # existing shards: missing, damaged, or not matching their manifest
    "shards-dir-missing": train(
        "--shards-dir", "{tmp}/nowhere", message="does not exist: shard the dataset first"
    ),
    "shards-dir-a-file": train(
        "--shards-dir", "{tmp}/a-file", message="a-file is a file, not a shards folder: pass"
    ),
    "shards-no-manifest": shards(message="has no manifest.json", damage="no_manifest"),
    "shards-manifest-not-json": shards(message="is not valid JSON", damage="manifest_not_json"),
    "shards-manifest-without-label": shards(
        message="is not a Strategist manifest", damage="manifest_without_label"
    ),
    "shards-counts-do-not-add-up": shards(
        message="do not add up", damage="counts_do_not_add_up"
    ),
    "shards-record-count-differs": shards(
        message="the manifest says", damage="record_count_differs"
    ),
    "shard-file-missing": shards(message="is missing", damage="shard_missing"),
    "shard-file-truncated": shards(message="changed or truncated", damage="shard_truncated"),
    "shard-file-corrupted": shards(message="is corrupted", damage="shard_corrupted"),
    # a manifest that lies about its shards (checked against the records before launch)
    "manifest-image-shape-lies": shards(
        message="whose features (shape, encoding) are {'image': ([8, 8, 1]",
        damage="manifest_image_shape_lies",
    ),
    "manifest-image-shape-lies-unregistered": shards(
        message="feature 'image' has shape [64] there, its test records hold [8, 8, 1]",
        damage="manifest_image_shape_lies_unregistered",
    ),
    "manifest-num-classes-lies": shards(
        message="with 10 classes, but describes", damage="manifest_num_classes_lies"
    ),
    "manifest-label-range-lies-unregistered": shards(
        message="outside the 5 classes (0..4) it declares",
        damage="manifest_label_range_lies_unregistered",
    ),
    "manifest-num-classes-not-a-count": shards(
        message="num_classes 'ten' is not a count", damage="manifest_num_classes_not_a_count"
    ),
    "manifest-names-another-dataset": shards(
        message="it names dataset 'mnist', whose features", damage="manifest_names_another_dataset"
    ),
    "manifest-feature-key-lies-unregistered": shards(
        message="records have no feature 'pixels'", damage="manifest_feature_key_lies_unregistered"
    ),
    "manifest-record-format-unknown": shards(
        message="says its records are 'parquet'", damage="manifest_record_format_unknown"
    ),
    "manifest-path-leaves-the-folder": shards(
        message="is not a file of the folder", damage="manifest_path_leaves_the_folder"
    ),
    "shards-of-another-dataset": shards(
        "--dataset", "mnist", message="holds 'digits', not 'mnist'"
    ),
    # shards that cannot feed the cluster (found before launch, not by a failing task)
    "too-few-shards-for-workers": shards(
        "--strategy", "multi_worker_mirrored", "--workers", "5",
        message="too few for 5 workers",
    ),
    "batch-larger-than-the-data": shards(
        "--strategy", "multi_worker_mirrored", "--batch-size", "1000",
        message="is larger than the",
    ),
    # the other subcommands
    "select-no-machines": Case(
        ("select", "--machines", "0", "--gpus-per-machine", "4", "--model", "resnet50"),
        "--machines must be a whole number of at least 1",
    ),
    "select-unknown-gpu": Case(
        ("select", "--machines", "2", "--gpus-per-machine", "4", "--gpu", "tpu9",
         "--model", "resnet50"),
        "unknown GPU 'tpu9'; choose one of",
    ),
    "select-unknown-interconnect": Case(
        ("select", "--machines", "2", "--gpus-per-machine", "4", "--interconnect", "carrier-pigeon",
         "--model", "resnet50"),
        "unknown interconnect 'carrier-pigeon'; choose one of",
    ),
    "select-no-model": Case(
        ("select", "--machines", "2", "--gpus-per-machine", "4"),
        "one of the arguments --model --params is required",
    ),
    "compare-unknown-strategy": Case(
        ("compare", "--local", "--strategies", "mirrored,horovod", "--output", "{out}"),
        "unknown strategy horovod",
    ),
    "compare-strategy-twice": Case(
        ("compare", "--local", "--strategies", "mirrored,mirrored", "--output", "{out}"),
        "names a strategy twice",
    ),
    "compare-no-repeats": Case(
        ("compare", "--local", "--repeats", "0", "--output", "{out}"),
        "argument --repeats: must be 1 to 100",
    ),
    "compare-no-workers": Case(
        ("compare", "--local", "--workers", "0", "--output", "{out}"),
        "--workers must be at least 1",
    ),
    "compile-bad-image": Case(
        ("compile", "--pipeline", "training", "--target", "vertex", "--image", "not//a::uri",
         "-o", "{out}"),
        "is not a container image reference",
    ),
    "compile-unknown-target": Case(
        ("compile", "--pipeline", "training", "--target", "aws", "-o", "{out}"),
        "invalid choice: 'aws'",
    ),
    "submit-vertex-no-project": Case(
        ("submit", "--target", "vertex", "--pipeline", "training", "--region", "us-central1",
         "--pipeline-root", "gs://b/root"),
        "pass --project",
    ),
    "submit-kfp-no-host": Case(
        ("submit", "--target", "kfp", "--pipeline", "comparison"), "pass --host URL"
    ),
    "submit-unknown-pipeline-parameter": Case(
        ("submit", "--target", "kfp", "--pipeline", "training", "--host", "http://kfp:8080",
         "--param", "epoch=3"),
        "has no such parameter",
    ),
    "submit-parameter-of-the-wrong-type": Case(
        ("submit", "--target", "kfp", "--pipeline", "training", "--host", "http://kfp:8080",
         "--param", "promotion_margin=three"),
        "expected number double",
    ),
    "submit-run-config-field-of-the-wrong-type": Case(
        ("submit", "--target", "kfp", "--pipeline", "training", "--host", "http://kfp:8080",
         "--param", "run_config.training.epochs=three"),
        "training.epochs must be int",
    ),
    "schedule-invalid-cron": Case(
        ("schedule", "--target", "kfp", "--pipeline", "training", "--host", "http://kfp:8080",
         "--cron", "0 25 * * *"),
        "not a valid cron expression",
    ),
    "schedule-cron-with-seconds-on-vertex": Case(
        ("schedule", "--target", "vertex", "--pipeline", "training", "--project", "my-project",
         "--region", "us-central1", "--pipeline-root", "gs://b/root", "--cron", "0 0 3 * * *"),
        "has 6 fields",
    ),
    "train-cloud-flag-without-target": train(
        "--gpu", "t4", message="apply to cloud runs: add --target"
    ),
    "status-of-no-run": Case(("status", "{tmp}"), "holds no status.json"),
    "gate-missing-report": Case(
        ("gate", "{tmp}/none.json", "--baseline", "{tmp}/none.json"), "file not found"
    ),
}  # fmt: skip


def run_cli(argv: list[str]) -> int:
    """The CLI's exit code, whether it returns it or argparse raises SystemExit."""
    try:
        return cli.main(argv)
    except SystemExit as exit_:
        return exit_.code


@pytest.fixture
def spoiled_shards(digits_shards, tmp_path):
    def make(damage: str | None) -> Path:
        copy = tmp_path / "shards"
        shutil.copytree(digits_shards, copy)
        if damage:
            DAMAGE[damage](copy)
        return copy

    return make


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_bad_input_exits_2_with_what_to_do_before_anything_starts(
    case, tmp_path, spoiled_shards, capsys
):
    out = tmp_path / "out"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "a-file").write_text("not a folder\n")
    places = {"{out}": str(out), "{tmp}": str(scratch)}
    if "{shards}" in case.argv:
        places["{shards}"] = str(spoiled_shards(case.damage))
    argv = []
    for arg in case.argv:
        for key, value in places.items():
            arg = arg.replace(key, value)
        argv.append(arg)

    code = run_cli(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert case.message in err, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"strategist {argv[0]}: error: ") or last.startswith("strategist: ")
    assert len(last) < 400  # one line, not a dump
    assert not out.exists()  # nothing was started or written
    assert not trainer_pids(str(out)) and not trainer_pids(str(tmp_path))
    assert sorted(p.name for p in scratch.iterdir()) == ["a-file"]  # no data dir filled


def test_the_matrix_covers_every_subcommand_and_25_train_cases():
    from tests.test_cli_train import BAD_INPUT

    commands = {case.argv[0] for case in CASES.values()}
    assert commands >= set(cli.SUBCOMMANDS), commands
    train_cases = [c for c in CASES.values() if c.argv[0] == "train"] + list(BAD_INPUT)
    assert len(train_cases) >= 25
    assert len({(c.argv, c.damage) for c in CASES.values()}) == len(CASES)  # no duplicates


# -- files that are not what they claim, limits, and one-line argument errors ------------
# (the adversarial probe's tracebacks, issue 18). `{bad}` is a folder `bad_files` fills.

GOOD_REPORT = {"results": [{"strategy": "mirrored", "examples_per_second": 100.0,
                            "eval_accuracy": 0.9}]}  # fmt: skip
UNREACHABLE_KFP = "http://127.0.0.1:9"  # the discard port: nothing listens on this machine


def bad_files(folder: Path) -> None:
    """Files of every shape the probe fed Strategist, under `folder`."""
    contents = {
        "null": b"null",
        "binary": bytes(range(256)),
        "deep": b"[" * 100_000 + b"]" * 100_000,
        "not-utf8": b'{"results": "\xff\xfe"}',
    }
    for name, data in contents.items():
        (folder / f"{name}.json").write_bytes(data)
        (folder / f"shards-{name}").mkdir()
        (folder / f"shards-{name}" / "manifest.json").write_bytes(data)
    (folder / "shards-folder" / "manifest.json").mkdir(parents=True)
    (folder / "dir.json").mkdir()
    (folder / "tfds").mkdir()
    (folder / "empty-baseline.json").write_text(json.dumps({"results": []}))
    (folder / "report.json").write_text(json.dumps(GOOD_REPORT))
    over = {"results": [{**GOOD_REPORT["results"][0], "eval_accuracy": 1.5}]}
    (folder / "accuracy-1.5.json").write_text(json.dumps(over))
    (folder / "link.yaml").symlink_to(folder / "report.json")
    os.mkfifo(folder / "fifo.yaml")
    (folder / "shards-zero").mkdir()
    (folder / "shards-zero" / "manifest.json").symlink_to("/dev/zero")


def gate(report: str, baseline: str, message: str) -> Case:
    return Case(("gate", report, "--baseline", baseline), message)


def select(*argv: str, message: str) -> Case:
    return Case(("select", "--machines", "1", "--gpus-per-machine", "1", *argv), message)


def compile_to(path: str, message: str) -> Case:
    return Case(("compile", "--pipeline", "training", "--target", "vertex", "-o", path), message)


BAD_FILE_CASES = {
    **{
        f"manifest-{name}": train("--shards-dir", f"{{bad}}/shards-{name}", message=message)
        for name, message in {
            "null": "is not a Strategist manifest",
            "folder": "cannot read",
            "binary": "is not UTF-8 JSON text",
            "deep": "nests deeper than 64 levels",
            "not-utf8": "is not UTF-8 JSON text",
        }.items()
    },
    **{
        f"gate-{name}": gate(f"{{bad}}/{name}.json", "{bad}/report.json", message)
        for name, message in {
            "binary": "is not UTF-8 JSON text",
            "deep": "nests deeper than 64 levels",
            "not-utf8": "is not UTF-8 JSON text",
            "dir": "file not found",
        }.items()
    },
    "gate-empty-baseline": gate("{bad}/report.json", "{bad}/empty-baseline.json", "no results"),
    # the third probe's: inputs that never end (/dev/zero) or block (a FIFO) hung until killed
    "gate-report-dev-zero": gate("/dev/zero", "{bad}/report.json", "not a regular file"),
    "gate-baseline-fifo": gate("{bad}/report.json", "{bad}/fifo.yaml", "not a regular file"),
    "select-history-dev-zero": select(
        "--model", "mlp", "--history", "/dev/zero", message="not a regular file"
    ),
    "manifest-dev-zero": train(
        "--shards-dir", "{bad}/shards-zero", message="not a regular file"
    ),
    "gate-accuracy-above-1": gate(
        "{bad}/accuracy-1.5.json", "{bad}/report.json", "is not between 0 and 1"
    ),
    **{
        f"select-history-{name}": select(
            "--model", "mlp", "--history", f"{{bad}}/{name}.json", message=message
        )
        for name, message in {
            "deep": "nests deeper than 64 levels",
            "not-utf8": "is not UTF-8 JSON text",
        }.items()
    },
    "select-a-billion-classes": select(
        "--model", "mlp", "--classes", "1000000000", message="at most 100,000 classes"
    ),
    "select-1000-gpus-per-machine": Case(
        ("select", "--machines", "1", "--gpus-per-machine", "1000", "--model", "mlp"),
        "no machine holds more than 8 t4 GPUs",
    ),
    "select-network-1e12": Case(
        ("select", "--machines", "2", "--gpus-per-machine", "1", "--model", "mlp",
         "--network-gbps", "1e12"),
        "is not a network speed",
    ),
    "compile-to-a-folder": compile_to("{bad}/dir.json", "is a folder"),
    "compile-to-nothing": compile_to("", "-o is empty"),
    "compile-over-a-device": compile_to("/dev/full", "is not a regular file"),
    "compile-over-a-symlink": compile_to("{bad}/link.yaml", "is not a regular file"),
    "compile-over-a-fifo": compile_to("{bad}/fifo.yaml", "is not a regular file"),
    "compare-output-a-file": Case(
        ("compare", "--local", "--output", "{bad}/report.json"), "is a file: pass a folder"
    ),
    "train-output-read-only": train(
        "--output", "/sys/strategist-output", message="pass a writable folder"
    ),
    "train-output-empty": train("--output", "", message="--output is empty"),
    "train-seed-above-2-32": train("--seed", "4294967296", message="between 0 and 4294967295"),
    "train-seed-negative": train("--seed", "-1", message="between 0 and 4294967295"),
    "compare-target-accuracy-2": Case(
        ("compare", "--local", "--target-accuracy", "2", "--output", "{out}"),
        "pass a number in (0, 1]",
    ),
    # limits: what the machine and the data hold (issue 18, item 7)
    "train-a-trillion-shards": train(
        "--num-shards", "1000000000000", message="open-file limit); pass fewer"
    ),
    "train-more-shards-than-examples": train(
        "--num-shards", "1000", "--data-dir", "{bad}/tfds",
        message="is more than the 359 examples of digits's test split",
    ),
    "train-500-workers": train(
        "--strategy", "multi_worker_mirrored", "--workers", "500", "--batch-size", "1",
        message="cluster of 500 processes is more than this machine holds",
    ),
    "train-100-parameter-servers": train(
        "--strategy", "parameter_server", "--ps", "100",
        message="cluster of 103 processes is more than this machine holds",
    ),
    "train-512-devices": train(
        "--strategy", "mirrored", "--gpus-per-machine", "512",
        message="cluster of 512 replicas is more than this machine holds",
    ),
    "compare-100-workers": Case(
        ("compare", "--local", "--strategies", "multi_worker_mirrored", "--workers", "100",
         "--output", "{out}"),
        "pass fewer --workers/--ps/--gpus-per-machine, or --oversubscribe",
    ),
    "argparse-type-error-is-one-line": train("--epochs", "x", message="'x' is not a whole number"),
    # the second probe's: a typo-sized epoch count trained on; an empty name fell back to digits
    "train-epochs-1e20": train(
        "--epochs", "99999999999999999999", message="--epochs must be at most 1,000,000"
    ),
    "train-dataset-empty": train("--dataset", "", message="--dataset is empty"),
    "compile-o-in-proc": compile_to("/proc/version", message="cannot write in /proc"),
    "train-shards-dir-empty": train("--shards-dir", "", message="--shards-dir is empty"),
    "compare-model-module-empty": Case(
        ("compare", "--local", "--model-module", "", "--output", "{out}"),
        "--model-module is empty",
    ),
    # --param values meet the pipeline's own validation before any request
    "submit-param-target-accuracy-2": Case(
        ("submit", "--target", "kfp", "--pipeline", "comparison", "--host", UNREACHABLE_KFP,
         "--param", "target_value=2"),
        "target_value must be above 0 and at most 1",
    ),
    "submit-param-repeats-0": Case(
        ("submit", "--target", "kfp", "--pipeline", "comparison", "--host", UNREACHABLE_KFP,
         "--param", "repeats=0"),
        "--param repeats 0: pass a whole number of runs, 1 to 100",
    ),
    "submit-param-seed-negative": Case(
        ("submit", "--target", "kfp", "--pipeline", "comparison", "--host", UNREACHABLE_KFP,
         "--param", "run_config.training.seed=-1"),
        "--seed must be between 0 and 4294967295",
    ),
    "submit-unreachable-kfp-host": Case(
        ("submit", "--target", "kfp", "--pipeline", "training", "--host", UNREACHABLE_KFP),
        f"cannot reach the KFP host {UNREACHABLE_KFP}",
    ),
    "schedule-unreachable-kfp-host": Case(
        ("schedule", "--target", "kfp", "--pipeline", "training", "--host", UNREACHABLE_KFP,
         "--cron", "0 0 * * *"),
        f"cannot reach the KFP host {UNREACHABLE_KFP}",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD_FILE_CASES.values()), ids=list(BAD_FILE_CASES))
def test_bad_files_limits_and_argument_errors_exit_2_in_one_line(case, tmp_path, capsys):
    """Each exits 2 at once with one line saying what to do: no traceback, no usage block,
    nothing started, no file replaced (a traceback exits 1, and made gate report a regression)."""
    out = tmp_path / "out"
    bad = tmp_path / "bad"
    bad.mkdir()
    bad_files(bad)
    before = {p.name: (p.is_symlink(), p.stat().st_mode) for p in bad.iterdir()}
    argv = [arg.replace("{out}", str(out)).replace("{bad}", str(bad)) for arg in case.argv]
    started = time.monotonic()
    code = run_cli(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert case.message in err, err
    assert "Traceback" not in err and "usage:" not in err
    assert len(err.strip().splitlines()) == 1, err  # one line, not a usage block or a dump
    assert err.startswith(f"strategist {argv[0]}: error: ")
    assert time.monotonic() - started < 20  # an unreachable host fails fast
    assert not out.exists()
    assert not trainer_pids(str(tmp_path))
    assert {p.name: (p.is_symlink(), p.stat().st_mode) for p in bad.iterdir()} == before
    assert Path("/dev/full").is_char_device()


def test_the_machine_size_bound_gives_the_numbers_and_yields_to_oversubscribe():
    import argparse

    from components.core.config import ClusterConfig, RunConfig
    from components.core.launch.preflight import check_machine_size
    from pipelines.cli import common

    config = RunConfig(cluster=ClusterConfig("parameter_server", workers=4, ps=1))  # 6 tasks
    check_machine_size(config, cores=2, memory_bytes=24 << 30)  # 6 <= 4 x 2
    with pytest.raises(ConfigError, match=r"6 processes .* at most 4 processes \(4 per core x 1\)"):
        check_machine_size(config, cores=1, memory_bytes=24 << 30)
    with pytest.raises(ConfigError, match=r"at most 5 processes at 1 GiB each \(5.0 GiB"):
        check_machine_size(config, cores=8, memory_bytes=5 << 30)
    big = RunConfig(cluster=ClusterConfig("parameter_server", workers=200, ps=1))
    common.check_machine_size(argparse.Namespace(oversubscribe=True), big)  # allowed
    with pytest.raises(ConfigError, match="--oversubscribe"):
        common.check_machine_size(argparse.Namespace(oversubscribe=False), big)


@pytest.mark.parametrize("command", ["train", "compare"])
def test_an_unprepared_dataset_offline_is_refused_before_any_step(
    command, tmp_path, monkeypatch, capsys
):
    from components.core.datasets import resolution

    # Port 1 on loopback refuses at once: the real probe, deterministically offline.
    monkeypatch.setattr(resolution, "_DOWNLOAD_PROBE", ("127.0.0.1", 1))
    out, data_dir = tmp_path / "out", tmp_path / "tfds"
    data_dir.mkdir()
    argv = [command, "--local", "--dataset", "mnist", "--epochs", "1"]
    argv += ["--data-dir", str(data_dir), "--output", str(out)]
    code = run_cli(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "dataset 'mnist' is not prepared" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert not out.exists()  # compare's pipeline (its shard step) never started


@pytest.fixture
def forbidding_storage(monkeypatch):
    """A server that answers every Cloud Storage request 403, as Google does a caller
    without access; the storage layer is pointed at it as at an emulator."""
    import http.server
    import threading

    class Forbidden(http.server.BaseHTTPRequestHandler):
        def deny(self):
            body = json.dumps({"error": {"code": 403, "message": "caller does not have "
                               "storage.objects.list access"}}).encode()  # fmt: skip
            self.send_response(403)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = deny

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Forbidden)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    from components.core import storage

    monkeypatch.setenv(storage.EMULATOR_ENV, f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.delenv(storage.LOCAL_ROOT_ENV, raising=False)
    yield
    server.shutdown()


def test_gs_data_the_caller_may_not_read_is_refused_with_what_to_do(
    forbidding_storage, tmp_path, capsys
):
    out = tmp_path / "out"
    argv = ["train", "--local", "--data", "gs://locked/tables/*.csv", "--label", "y"]
    code = run_cli([*argv, "--epochs", "1", "--output", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    (line,) = err.strip().splitlines()
    assert line.startswith("strategist train: error: --data gs://locked/tables/*.csv: cannot read")
    assert "Forbidden" in line and "gcloud auth application-default login" in line
    assert not out.exists()


# Each flag that takes a gs:// URI, with what it needs beside it; {bucket} is the bucket.
GS_INPUTS = {
    "--data": ["--data", "gs://{bucket}/tables/*.csv", "--label", "y"],
    "--shards-dir": ["--shards-dir", "gs://{bucket}/shards"],
    "--dataset-module": ["--dataset", "x", "--dataset-module", "gs://{bucket}/b.py"],
    "--model-module": ["--model-module", "gs://{bucket}/m.py"],
}


def gs_input(flag: str, bucket: str) -> tuple[list[str], str]:
    """The arguments of `flag` reading from `bucket`, and the URI the message must name."""
    argv = [arg.replace("{bucket}", bucket) for arg in GS_INPUTS[flag]]
    return argv, argv[argv.index(flag) + 1]


@pytest.mark.parametrize("flag", [flag for flag in GS_INPUTS if flag != "--data"])
@pytest.mark.parametrize("command", ["train", "compare"])
def test_gs_input_the_caller_may_not_read_is_refused_with_what_to_do(
    command, flag, forbidding_storage, tmp_path, capsys
):
    """gcsfs answers a refused listing with 'no such file': the refusal must show."""
    out = tmp_path / "out"
    given, uri = gs_input(flag, "locked")
    code = run_cli([command, "--local", *given, "--epochs", "1", "--output", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    (line,) = err.strip().splitlines()
    assert line.startswith(f"strategist {command}: error: {flag} {uri}: cannot read it"), line
    assert "Forbidden" in line and "gcloud auth application-default login" in line
    assert not out.exists()


@pytest.mark.parametrize("flag", list(GS_INPUTS))
@pytest.mark.parametrize("command", ["train", "compare"])
def test_gs_input_that_cannot_be_reached_is_refused_in_seconds_in_one_line(
    command, flag, tmp_path, monkeypatch, capsys
):
    from components.core import storage, storage_access

    # Port 1 on loopback refuses at once: an offline machine, deterministically.
    monkeypatch.setattr(storage_access, "API_ADDRESS", ("127.0.0.1", 1))
    monkeypatch.delenv(storage.EMULATOR_ENV, raising=False)
    monkeypatch.delenv(storage.LOCAL_ROOT_ENV, raising=False)
    out = tmp_path / "out"
    given, uri = gs_input(flag, "nobucket-xyz")
    started = time.monotonic()
    code = run_cli([command, "--local", *given, "--epochs", "1", "--output", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{flag} {uri}: cannot reach Cloud Storage" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert time.monotonic() - started < 10
    assert not out.exists()  # no process or pipeline step started


# -- an output folder holding another run is refused before any long work ---------------


def another_runs_folder(path: Path) -> Path:
    """A finished run's folder, of a configuration no command line here gives."""
    from components.core import run_folder

    path.mkdir()
    marker = {"run_id": "earlier", "config_sha256": "0" * 64, "pid": 1}
    (path / run_folder.MARKER_NAME).write_text(json.dumps(marker))
    (path / run_folder.STATUS_NAME).write_text(json.dumps({"state": "succeeded"}))
    return path


@pytest.mark.parametrize("command", ["train", "compare"])
def test_a_folder_of_another_run_is_refused_before_the_records_are_read_back(
    command, spoiled_shards, tmp_path, capsys
):
    """Corrupted records are found only by reading them back (seconds to minutes on real
    data): the folder's refusal comes first, and nothing else is said."""
    out = another_runs_folder(tmp_path / "out")
    module = tmp_path / "my_model.py"
    module.write_text(textwrap.dedent(GOOD_MODEL))
    shards_copy = spoiled_shards("shard_corrupted")
    argv = [command, "--local", "--shards-dir", str(shards_copy), "--model-module", str(module)]
    code = run_cli([*argv, "--epochs", "1", "--output", str(out)])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    (line,) = captured.err.strip().splitlines()
    assert f"--output {out} holds a run of another configuration: pass --overwrite" in line
    assert captured.out == ""  # no model pre-flight, no "on a localhost cluster"
    assert sorted(p.name for p in out.iterdir()) == ["status.json", "strategist-run.json"]


def test_a_folder_of_another_run_is_refused_before_the_data_is_sharded(tmp_path, capsys):
    out = another_runs_folder(tmp_path / "out")
    data_dir = tmp_path / "tfds"
    data_dir.mkdir()
    argv = ["train", "--local", "--dataset", "digits", "--data-dir", str(data_dir)]
    code = run_cli([*argv, "--epochs", "1", "--output", str(out)])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert "holds a run of another configuration" in captured.err, captured.err
    assert captured.out == "", captured.out
    assert not (data_dir / "strategist_shards").exists()


def test_echoed_user_text_is_escaped_and_a_urls_password_masked(capsys):
    """An argument carrying terminal escapes (clear screen, reset) is echoed escaped, and
    `submit --host http://user:pass@...` never prints the password; before, the escapes
    reached the terminal raw and the refusal named the host with its password."""
    code = run_cli(["train", "--local", "--strategy", "mirrored\x1b[2J\x1bc\r"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "\x1b" not in err and "\r" not in err, repr(err)
    assert "mirrored\\x1b[2J\\x1bc\\r" in err, err

    host = "http://alice:s3cretPW@127.0.0.1:9"  # port 9 (discard): refused at once
    code = run_cli(["submit", "--pipeline", "training", "--target", "kubeflow", "--host", host])
    out = capsys.readouterr()
    assert code == 2, out.err
    assert "s3cretPW" not in out.out + out.err, out.err
    assert "http://alice:***@127.0.0.1:9" in out.err, out.err
