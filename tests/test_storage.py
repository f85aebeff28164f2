"""The storage layer against a real Cloud Storage server: `gcp-storage-emulator` on 127.0.0.1.

gcsfs speaks Cloud Storage's JSON API to the emulator exactly as to Google's
servers (`STORAGE_EMULATOR_HOST`, anonymous credentials); nothing is mocked.
Upload order is observed by wrapping the real filesystem's calls (they still
run). The rehearsal mapping (`STRATEGIST_GCS_LOCAL_ROOT`) is shown with
TensorFlow reading the mapped files. The last tests scan the core for file
calls that bypass the storage layer.
"""

from __future__ import annotations

import ast
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from components.core import datasets, promotion, run_metrics, storage, storage_trees
from components.core.config import ConfigError, RunConfig
from components.core.run_metrics import RunMetrics

BUCKET = "strategist-test"
CORE = Path(__file__).resolve().parents[1] / "components" / "core"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="session")
def emulator(tmp_path_factory) -> str:
    """A Cloud Storage emulator process on 127.0.0.1 with one bucket; its address."""
    port = _free_port()
    log = open(tmp_path_factory.mktemp("emulator") / "emulator.log", "w+")  # noqa: SIM115
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gcp_storage_emulator",
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--in-memory",
            "--default-bucket",
            BUCKET,
            "--quiet",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(
                        f"the storage emulator did not start: {log.read()}"
                    ) from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


@pytest.fixture
def gs(emulator, monkeypatch, request) -> str:
    """A `gs://` folder of this test on the emulator (no rehearsal mapping)."""
    monkeypatch.setenv(storage.EMULATOR_ENV, emulator)
    monkeypatch.delenv(storage.LOCAL_ROOT_ENV, raising=False)
    return f"gs://{BUCKET}/{request.node.name}"


@pytest.fixture
def uploads(gs, monkeypatch) -> list[tuple[str, str]]:
    """Every object write and delete the real filesystem makes, in order."""
    fs = storage.filesystem()
    events: list[tuple[str, str]] = []
    for name in ("put_file", "pipe_file", "rm_file", "rm"):
        real = getattr(fs, name)

        def record(path, *args, _real=real, _name=name, **kwargs):
            target = args[0] if _name == "put_file" else path
            events.append((_name, str(target)))
            return _real(path, *args, **kwargs)

        monkeypatch.setattr(fs, name, record)
    return events


def a_record(**overrides) -> RunMetrics:
    values = {
        "strategy": "mirrored",
        "num_replicas": 2,
        "examples_per_second": 1234.5,
        "eval_accuracy": 0.93,
        "epoch_seconds": [1.0, 0.5],
    }
    return RunMetrics(**{**values, **overrides})


# -- gs:// through the emulator ----------------------------------------------------


def test_shards_written_to_gs_are_read_back_by_load_manifest(gs, uploads, tfds_dir):
    shards = f"{gs}/shards"
    written = datasets.shard_dataset("digits", shards, num_shards=2, data_dir=str(tfds_dir))

    manifest = datasets.load_manifest(shards)
    assert manifest.to_dict() == written.to_dict()
    assert manifest.split("train").num_examples + manifest.split("test").num_examples == 1797
    names = storage.listdir(shards)
    # TFDS's records are kept as they are, with the feature description that decodes them.
    assert manifest.record_format == datasets.TFDS_RECORDS
    assert names == sorted(
        [
            datasets.MANIFEST_NAME,
            datasets.TFDS_FEATURES_NAME,
            *(f.path for s in ("train", "test") for f in manifest.split(s).files),
        ]
    )
    for path in manifest.file_paths("train"):
        assert path.startswith(f"{shards}/") and storage.size(path) > 0
    # The manifest is the commit: uploaded after every shard file.
    puts = [target for name, target in uploads if name == "put_file"]
    assert puts[-1].endswith(f"/shards/{datasets.MANIFEST_NAME}")
    assert len(puts) == len(names)
    # Shards are reused from Cloud Storage, not written again.
    uploads.clear()
    again = datasets.shard_dataset("digits", shards, num_shards=2, data_dir=str(tfds_dir))
    assert again.to_dict() == written.to_dict() and not uploads


def test_damaged_shards_on_gs_are_refused_with_what_to_do(gs, tfds_dir):
    shards = f"{gs}/shards"
    with pytest.raises(ConfigError, match="does not exist: shard the dataset first"):
        datasets.load_manifest(shards)
    datasets.shard_dataset("digits", shards, num_shards=2, data_dir=str(tfds_dir))
    victim = datasets.load_manifest(shards).file_paths("test")[1]
    storage.write_bytes(victim, storage.read_bytes(victim)[:-10])
    with pytest.raises(ConfigError, match="changed or truncated"):
        datasets.load_manifest(shards)
    storage.remove_file(victim)
    with pytest.raises(ConfigError, match="is missing"):
        datasets.load_manifest(shards)


def _upload_npz(path: str, x, y) -> None:
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.savez(buffer, x=x, y=y)
    storage.write_bytes(path, buffer.getvalue())


def test_data_files_on_gs_are_sharded_through_the_storage_layer(gs, tmp_path):
    """`--data gs://bucket/*.npz` and `gs://.../*.csv`: globbed, read and fingerprinted on
    Cloud Storage (the emulator), sharded with every example; changed files are sharded anew."""
    import numpy as np
    import tensorflow as tf

    from components.core.config import DataConfig

    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    y = (np.arange(20) % 2).astype(np.int64)
    _upload_npz(f"{gs}/data/part-0.npz", x[:12], y[:12])
    _upload_npz(f"{gs}/data/part-1.npz", x[12:], y[12:])
    csv = "a,b,label\n" + "".join(f"{i},{2 * i},{i * 0.5}\n" for i in range(10))
    storage.write_text(f"{gs}/table/rows.csv", csv)

    data = DataConfig(files=f"{gs}/data/*.npz", num_shards=2, test_fraction=0.25)
    manifest = datasets.shard_data(data, str(tmp_path / "npz"), log=lambda _: None)
    assert manifest.dataset == "data" and manifest.num_classes == 2  # named by the folder
    assert (manifest.split("train").num_examples, manifest.split("test").num_examples) == (15, 5)
    read = []  # every record, parsed as a protocol buffer (no tf.data graph to build)
    for path in manifest.file_paths("train") + manifest.file_paths("test"):
        for record in tf.data.TFRecordDataset(path):
            feature = tf.train.Example.FromString(record.numpy()).features.feature
            read.append((list(feature["x"].float_list.value), feature["y"].int64_list.value[0]))
    assert sorted(read) == sorted(zip(x.tolist(), y.tolist(), strict=True))  # every example

    table = DataConfig(files=f"{gs}/table/rows.csv", label="label", test_fraction=0.2)
    rows = datasets.shard_data(table, str(tmp_path / "csv"), log=lambda _: None)
    assert rows.columns == ("a", "b") and rows.num_classes is None  # float labels: regression
    assert rows.split("train").num_examples + rows.split("test").num_examples == 10

    # Reused while the objects are unchanged; a rewritten object is sharded again.
    assert datasets.shard_data(data, str(tmp_path / "npz"), log=print).version == manifest.version
    _upload_npz(f"{gs}/data/part-1.npz", x[12:16], y[12:16])
    again = datasets.shard_data(data, str(tmp_path / "npz"), log=lambda _: None)
    assert again.version != manifest.version
    assert again.split("train").num_examples + again.split("test").num_examples == 16


def test_a_dataset_module_on_gs_is_found_then_refused_with_what_to_do(gs):
    """Its server answers (no minute of retries), and the message tells found from missing."""
    from components.core.tfds_source import import_dataset_module

    storage.write_text(f"{gs}/b.py", "X = 1\n")
    with pytest.raises(ConfigError, match=r"b\.py: a builder file is imported from this machine"):
        import_dataset_module(f"{gs}/b.py")
    with pytest.raises(ConfigError, match=r"nope\.py: no such file: pass the path of a \.py"):
        import_dataset_module(f"{gs}/nope.py")


def test_a_model_module_on_gs_is_fetched_through_storage_and_a_missing_one_said(gs):
    """What a Kubeflow replica does with its staged module (`gs://`)."""
    from components.core import model_module

    storage.write_text(f"{gs}/m.py", "def build_model(spec):\n    return None\n")
    assert model_module.load(f"{gs}/m.py").name == "m"
    with pytest.raises(ConfigError, match=r"nope\.py: no such file: pass the path of a \.py"):
        model_module.load(f"{gs}/nope.py")


def test_metrics_and_status_are_written_whole_and_read_back(gs, uploads):
    path = f"{gs}/run/metrics.json"
    run_metrics.write(path, a_record())
    assert run_metrics.read(path) == a_record()
    run_metrics.write(path, a_record(eval_accuracy=0.97))
    assert run_metrics.read(path).eval_accuracy == 0.97

    storage.write_json(f"{gs}/run/status.json", {"state": "running"})
    storage.write_json(f"{gs}/run/status.json", {"state": "succeeded"})
    assert storage.read_json(f"{gs}/run/status.json") == {"state": "succeeded"}
    # One object upload per write: no temporary objects, no renames.
    assert [name for name, _ in uploads] == ["pipe_file"] * 4
    assert storage.listdir(f"{gs}/run") == ["metrics.json", "status.json"]
    with pytest.raises(ConfigError, match="cannot read it"):
        run_metrics.read(f"{gs}/run/absent.json")


def test_model_export_uploads_a_savedmodel_with_its_marker_last(gs, uploads, tmp_path):
    import numpy as np
    import tf_keras as keras

    from components.core import launch, model_export

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    run = f"{gs}/run"
    model_export.export_model(model, run, RunConfig())
    exported = f"{run}/{model_export.MODEL_DIR_NAME}"
    puts = [target for name, target in uploads if name == "put_file"]
    assert puts[-1] == f"{exported}/{storage_trees.TREE_MARKER}"[len("gs://") :]
    assert any(p.endswith("/saved_model.pb") for p in puts)
    assert storage_trees.is_complete(exported)
    marker = storage.read_json(f"{exported}/{storage_trees.TREE_MARKER}")
    assert "saved_model.pb" in marker["files"]

    # A second export first withdraws the marker, then replaces the tree.
    uploads.clear()
    model_export.export_model(model, run, RunConfig())
    assert uploads[0] == ("rm_file", f"{exported}/{storage_trees.TREE_MARKER}"[len("gs://") :])
    assert uploads[-1][1].endswith(storage_trees.TREE_MARKER)

    # The pipeline's train step copies it down as the Model artifact; TF loads it.
    local = tmp_path / "model"
    launch._copy_model(exported, str(local))
    loaded = keras.models.load_model(str(local), compile=False)
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(loaded(x).numpy(), model(x).numpy(), rtol=1e-6)
    storage.remove_file(f"{exported}/{storage_trees.TREE_MARKER}")
    with pytest.raises(RuntimeError, match="incomplete"):
        launch._copy_model(exported, str(tmp_path / "again"))


def test_promotion_pointer_on_gs(gs):
    store = promotion.PointerStore(f"{gs}/promotion")
    assert store.current() is None
    record = promotion.Promoted(f"{gs}/run/model", "test_accuracy", 0.95, "run-1", "now")
    assert store.promote(record) == f"{gs}/promotion/promoted.json"
    assert store.current() == record


def test_trees_tree_listing_and_removal(gs, tmp_path):
    (tmp_path / "tree" / "sub").mkdir(parents=True)
    (tmp_path / "tree" / "a.txt").write_text("a")
    (tmp_path / "tree" / "sub" / "b.txt").write_text("b")
    storage_trees.publish_tree(str(tmp_path / "tree"), f"{gs}/t", commit_file="a.txt")
    assert storage.isdir(f"{gs}/t") and storage.isfile(f"{gs}/t/sub/b.txt")
    assert storage.listdir(f"{gs}/t") == ["a.txt", "sub"]
    assert storage.glob(f"{gs}/t/*.txt") == [f"{gs}/t/a.txt"]
    storage_trees.download_tree(f"{gs}/t", str(tmp_path / "down"))
    assert (tmp_path / "down" / "sub" / "b.txt").read_text() == "b"
    storage.remove_tree(f"{gs}/t")
    assert not storage.exists(f"{gs}/t/a.txt") and not storage.isdir(f"{gs}/t")


def test_a_history_folder_on_gs_is_every_comparison_json_under_it(gs, tmp_path):
    """`select --history gs://.../runs` finds each run's comparison.json however deep."""
    from components.core import selection
    from tests.selection_helpers import _comparison

    for run, eps in (("b-compare/nested", 3000.0), ("a-compare", 6000.0)):
        local = _comparison(tmp_path, f"{eps:.0f}.json", [("parameter_server", eps)])
        storage.copy_file(local, f"{gs}/runs/{run}/comparison.json")
    storage.write_text(f"{gs}/runs/a-compare/comparison.json.tmp", "not json")
    storage.write_text(f"{gs}/runs/other.json", "not json")
    assert storage.find(f"{gs}/runs", "comparison.json") == [
        f"{gs}/runs/a-compare/comparison.json",
        f"{gs}/runs/b-compare/nested/comparison.json",
    ]
    records = selection.load_history([f"{gs}/runs"])
    assert [r["examples_per_second"] for r in records] == [6000.0, 3000.0]
    assert records[1]["_source"] == f"{gs}/runs/b-compare/nested/comparison.json"


# -- the rehearsal mapping ----------------------------------------------------------


def test_local_view_maps_gs_and_gcsfuse_paths_only_under_a_rehearsal(monkeypatch, tmp_path):
    monkeypatch.delenv(storage.LOCAL_ROOT_ENV, raising=False)
    assert storage.local_view("gs://b/a/x") == "gs://b/a/x"
    assert storage.local_view("/gcs/b/a/x") == "/gcs/b/a/x"
    monkeypatch.setenv(storage.LOCAL_ROOT_ENV, str(tmp_path))
    assert storage.local_view("gs://b/a/x") == str(tmp_path / "b" / "a" / "x")
    assert storage.local_view("/gcs/b/a/x") == str(tmp_path / "b" / "a" / "x")
    assert storage.local_view("/data/x") == "/data/x"
    assert storage.local_view("runs/x") == "runs/x"


def test_a_rehearsal_serves_gs_from_a_local_folder_that_tensorflow_reads(
    monkeypatch, tmp_path, tfds_dir
):
    import tensorflow as tf

    monkeypatch.delenv(storage.EMULATOR_ENV, raising=False)
    monkeypatch.setenv(storage.LOCAL_ROOT_ENV, str(tmp_path / "buckets"))
    shards = "gs://rehearsal-bucket/data/shards"
    datasets.shard_dataset("digits", shards, num_shards=2, data_dir=str(tfds_dir))
    on_disk = tmp_path / "buckets" / "rehearsal-bucket" / "data" / "shards"
    assert (on_disk / datasets.MANIFEST_NAME).is_file()

    # The manifest keeps the job's own URIs; TensorFlow is handed the mapped files.
    manifest = datasets.load_manifest(shards, verify_records=True)
    assert manifest.file_paths("test")[0].startswith(shards + "/")
    assert storage.glob(f"{shards}/test-*") == manifest.file_paths("test")
    records = tf.data.TFRecordDataset([storage.local_view(p) for p in manifest.file_paths("test")])
    assert sum(1 for _ in records) == manifest.split("test").num_examples
    examples = sum(int(labels.shape[0]) for _, labels in datasets.eval_dataset(manifest))
    assert examples == manifest.split("test").num_examples
    # Its gcsfuse form is the same objects.
    assert datasets.load_manifest("/gcs/rehearsal-bucket/data/shards").to_dict() == (
        manifest.to_dict()
    )


def test_a_rehearsed_export_is_published_file_by_file_as_in_the_cloud(monkeypatch, tmp_path):
    import tf_keras as keras

    from components.core import atomic, model_export

    monkeypatch.setenv(storage.LOCAL_ROOT_ENV, str(tmp_path))

    def no_folder_rename(*args, **kwargs):
        raise AssertionError("a folder was renamed on a gs:// path")

    monkeypatch.setattr(atomic, "staged_dir", no_folder_rename)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model_export.export_model(model, "gs://b/run", RunConfig())
    exported = tmp_path / "b" / "run" / model_export.MODEL_DIR_NAME
    assert (exported / storage_trees.TREE_MARKER).is_file()
    assert keras.models.load_model(str(exported), compile=False) is not None
    # Vertex AI's gcsfuse form of the same bucket: no folder rename either.
    model_export.export_model(model, "/gcs/b/vertex-run", RunConfig())
    assert (
        tmp_path / "b" / "vertex-run" / model_export.MODEL_DIR_NAME / storage_trees.TREE_MARKER
    ).is_file()


def test_a_trainer_given_gs_paths_trains_under_a_rehearsal(tmp_path, tfds_dir):
    """The trainer's own arguments with gs:// paths, served from a folder: nothing else changes.

    Shards, backup (BackupAndRestore), TensorBoard logs, the SavedModel and
    metrics.json all land under the mapped folder, and no `gs:` folder appears.
    """
    from components.core.config import RunConfig

    root = tmp_path / "buckets"
    env = {
        **os.environ,
        storage.LOCAL_ROOT_ENV: str(root),
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONPATH": str(CORE.parents[1]),  # this checkout, whatever is installed
    }
    env.pop("TF_CONFIG", None)
    env.pop(storage.EMULATOR_ENV, None)
    shards = "gs://rehearsal/shards/digits"
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from components.core import datasets; "
            "datasets.shard_dataset('digits', sys.argv[1], num_shards=2, data_dir=sys.argv[2])",
            shards,
            str(tfds_dir),
        ],
        env=env,
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=120,
    )
    config = RunConfig.from_dict(
        {
            "data": {"shards_dir": shards, "num_shards": 2},
            "cluster": {"strategy": "one_device"},
            "training": {"epochs": 5},
            "output_dir": "gs://rehearsal/runs/one",
        }
    )
    done = subprocess.run(
        [sys.executable, "-m", "components.core.trainer", "--config-json", config.to_json()],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    run = root / "rehearsal" / "runs" / "one"
    metrics = run_metrics.read(str(run / "metrics.json"))
    assert metrics.eval_accuracy >= 0.85
    assert (run / "model" / storage_trees.TREE_MARKER).is_file()
    assert (run / "model" / "saved_model.pb").is_file()
    assert list((run / "tensorboard").rglob("events.out.tfevents.*"))
    assert not (run / "backup").exists()  # finished: the backup is removed
    assert not (tmp_path / "gs:").exists()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(storage.LOCAL_ROOT_ENV, str(root))
        assert run_metrics.read("gs://rehearsal/runs/one/metrics.json") == metrics


# -- no file call on a user path outside the storage layer --------------------------

# Calls that touch the file system directly. Anything in components/core that reads
# or writes a user's path must go through `storage` instead.
_FILE_CALLS = {
    "open",
    "io.open",
    "os.path.exists",
    "os.path.lexists",
    "os.path.isdir",
    "os.path.isfile",
    "os.path.getsize",
    "os.makedirs",
    "os.mkdir",
    "os.listdir",
    "os.scandir",
    "os.remove",
    "os.unlink",
    "os.rmdir",
    "os.rename",
    "os.replace",
    "glob.glob",
}
# pathlib's file methods, called on anything but the storage layer.
_PATH_METHODS = {
    "read_text",
    "write_text",
    "read_bytes",
    "write_bytes",
    "open",
    "mkdir",
    "exists",
    "is_dir",
    "is_file",
    "iterdir",
    "rglob",
    "unlink",
    "rmdir",
    "touch",
}
# The storage layer itself and its local primitives.
# run_folder.py: a local run's folder, its flock and ownership marker; callers hand it
# `storage.local_view` paths and skip it for a bucket (launch/local.py).
_STORAGE_MODULES = {"storage.py", "storage_trees.py", "atomic.py", "run_folder.py"}
# (module, call, first argument as written): machine facts, never a user's path.
_ALLOWED = {
    # Process start time and machine facts from /proc (Linux), not user data.
    ("training.py", "open", '"/proc/self/stat"'),
    ("training.py", "open", '"/proc/uptime"'),
    ("run_metrics.py", "open", '"/proc/cpuinfo"'),
    ("run_metrics.py", "open", '"/proc/meminfo"'),
    ("launch/preflight.py", "os.listdir", '"/proc/driver/nvidia/gpus"'),
    ("launch/liveness.py", "open", 'f"/proc/{pid}/stat"'),
    ("launch/preflight.py", "open", '"/proc/meminfo"'),
    # The processes a check or command marked (/proc/PID/environ), to kill them: not user files.
    ("launch/reaper.py", "os.listdir", '"/proc"'),
    ("launch/reaper.py", "open", 'f"/proc/{name}/environ"'),
    # Programs on PATH (dpkg-query; unshare, nsenter), not files of the user's.
    ("reduction_server.py", "shutil.which", '"dpkg-query"'),
    ("launch/netns.py", "shutil.which", "tool"),
    # The launcher's handles on its cluster's namespaces (/proc/HOLDER/ns/*), not user files.
    ("launch/netns.py", ".open", "os"),
    # Whether this process runs inside a Vertex AI task (its gcsfuse mount point).
    ("promotion.py", "os.path.isdir", "GCSFUSE_MOUNT"),
    ("model_profile.py", ".read_text", "BUNDLED_PATH"),
    # Shard files, written into `storage_trees.staged_tree`'s staging folder (published by it).
    ("tfrecord.py", "open", "path"),
    # A local half-written first checkpoint set aside for inspection (a remote one is removed
    # through storage: `storage.is_remote` decides before this call).
    ("preemption.py", "os.replace", "folder"),
}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def file_calls(source: str) -> list[tuple[str, str, int]]:
    """(call, first argument as written, line) of every direct file-system call in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        # atomic.* is the storage layer's local half: the core calls `storage`.
        if name in _FILE_CALLS or name.startswith(("shutil.", "atomic.")):
            first = ast.get_source_segment(source, node.args[0]) if node.args else ""
            found.append((name, first or "", node.lineno))
        elif isinstance(node.func, ast.Attribute) and node.func.attr in _PATH_METHODS:
            receiver = ast.get_source_segment(source, node.func.value) or ""
            if receiver != "storage" and not receiver.startswith(("storage.", "filesystem()")):
                found.append((f".{node.func.attr}", receiver, node.lineno))
    return found


def test_the_check_finds_file_calls_that_bypass_storage():
    source = (
        "import os, shutil\n"
        "def f(p):\n"
        "    if os.path.exists(p):\n"
        "        shutil.rmtree(p)\n"
        "    with open(p) as h:\n"
        "        h.read()\n"
        "    return Path(p).read_text(), storage.read_text(p)\n"
    )
    calls = [call for call, _, _ in file_calls(source)]
    assert calls == ["os.path.exists", "shutil.rmtree", "open", ".read_text"]


def test_the_core_reads_and_writes_user_paths_only_through_storage():
    offending = []
    seen_allowed = set()
    for path in sorted(CORE.rglob("*.py")):
        module = path.relative_to(CORE).as_posix()
        if module in _STORAGE_MODULES:
            continue
        for call, first, line in file_calls(path.read_text()):
            if (module, call, first) in _ALLOWED:
                seen_allowed.add((module, call, first))
                continue
            offending.append(f"components/core/{module}:{line}: {call}({first}...)")
    assert not offending, "use components.core.storage for these:\n" + "\n".join(offending)
    assert seen_allowed == _ALLOWED, f"stale allow-list entries: {_ALLOWED - seen_allowed}"


def test_join_keeps_gs_uris_and_local_paths_in_their_own_form():
    assert storage.join("gs://b/x", "y") == "gs://b/x/y"
    assert storage.join("gs://b/x/", "y", "z") == "gs://b/x/y/z"
    assert storage.join("/tmp/x", "y") == os.path.join("/tmp/x", "y")


# -- TensorFlow's own gs:// filesystem -----------------------------------------------


def test_tensorflow_reads_and_writes_gs_through_its_own_filesystem(tmp_path, tfds_dir):
    """TensorFlow's GCS filesystem and the storage layer agree on one emulated bucket.

    TensorFlow has no endpoint setting, so the emulator takes Google's host names
    inside private namespaces (see tests/tensorflow_gcs_check.py).
    """
    from tests.tensorflow_gcs_check import run_beside_emulator

    script = Path(__file__).with_name("tensorflow_gcs_check.py")
    result = run_beside_emulator(script, tmp_path, str(tfds_dir), timeout_s=300)
    assert result["tf_listdir"] == result["storage_listdir"]
    assert "manifest.json" in result["tf_listdir"] and result["tf_exists_manifest"]
    assert result["test_examples_read_by_tf"] == result["test_examples_in_manifest"] > 0
    assert result["tf_written_size_seen_by_storage"] == result["tf_written_size_seen_by_tf"]
    assert result["tf_records_read_back"] == ["record 0", "record 1", "record 2"]
    # `--data gs://.../*.tfrecord`: 2 files of 10 records, 1 in 5 of each to the test split.
    assert result["gs_tfrecord_examples_sharded"] == [16, 4]


def test_absolute_keeps_uris_and_anchors_local_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert storage.absolute("gs://my-bucket/runs/x") == "gs://my-bucket/runs/x"
    assert storage.absolute("runs/x") == str(tmp_path / "runs" / "x")
