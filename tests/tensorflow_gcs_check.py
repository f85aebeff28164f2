"""TensorFlow's own `gs://` filesystem against a Cloud Storage emulator; run by test_storage.py.

TensorFlow 2.21's GCS filesystem has no endpoint setting: it calls
`https://www.googleapis.com/storage/v1/`, `.../upload/storage/v1/` and
`https://storage.googleapis.com/` (strings in libtensorflow_framework.so.2;
tensorflow/tsl/platform/cloud/gcs_file_system.cc). It does read
`CURL_CA_BUNDLE` (which CA to trust) and `GOOGLE_AUTH_TOKEN_FOR_TESTING` (a
bearer token instead of credentials). So this script runs inside its own user,
network and mount namespaces (`unshare -Urnm`, made by the test), where only
loopback exists and a bind-mounted /etc/hosts sends both Google hosts to
127.0.0.1; there `gcp-storage-emulator` serves TLS on port 443 with a
certificate made here, and plain HTTP on port 80 (the emulator's resumable
upload `Location` says `http://`). Nothing leaves the namespace.

Usage: python tests/tensorflow_gcs_check.py WORK_DIR TFDS_DIR (prints one JSON line).
"""

from __future__ import annotations

import datetime
import json
import multiprocessing
import os
import ssl
import sys
import threading
from functools import partial
from http import server
from pathlib import Path

BUCKET = "tf-bucket"
REPO = Path(__file__).resolve().parents[1]


def _certificate(folder: str) -> tuple[str, str]:
    """A self-signed certificate for both Google hosts; (cert, key) file paths."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "storage emulator")])
    now = datetime.datetime.now(datetime.timezone.utc)
    hosts = [x509.DNSName("www.googleapis.com"), x509.DNSName("storage.googleapis.com")]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName(hosts), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
    with open(cert_path, "wb") as handle:
        handle.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as handle:
        handle.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return cert_path, key_path


def _serve(cert_path: str, key_path: str) -> None:
    """The emulator on 127.0.0.1:443 (TLS) and :80 (plain), one in-memory store."""
    from gcp_storage_emulator.handlers import buckets
    from gcp_storage_emulator.server import RequestHandler
    from gcp_storage_emulator.storage import Storage

    class Handler(RequestHandler):
        def parse_request(self):
            ok = super().parse_request()
            # TensorFlow's upload sends `Transfer-Encoding: chunked` and a Content-Length;
            # the emulator trusts the length and would store the chunk framing (RFC 9112
            # 6.3: chunked wins).
            if ok and "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                del self.headers["Content-Length"]
            return ok

        def log_message(self, *args):
            pass

    store = Storage(use_memory_fs=True)
    buckets.create_bucket(BUCKET, store)
    plain = server.ThreadingHTTPServer(("127.0.0.1", 80), partial(Handler, store))
    secure = server.ThreadingHTTPServer(("127.0.0.1", 443), partial(Handler, store))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    secure.socket = context.wrap_socket(secure.socket, server_side=True)
    threading.Thread(target=plain.serve_forever, daemon=True).start()
    secure.serve_forever()


def exact_uploads() -> None:
    """Makes the emulator store a multipart upload's content byte for byte.

    gcsfs ends a multipart upload's content with `\n` before the boundary; the
    emulator's email parser takes a content's own last `\r` for part of a `\r\n`
    line break and drops it (a TFRecord file whose CRC ends in 0x0D came back a
    byte short).
    """
    from gcp_storage_emulator import server as emulator

    original = emulator._read_data

    def read_data(handler, query):
        content_type = handler.headers.get("Content-Type") or ""
        if not content_type.startswith("multipart/related"):
            return original(handler, query)
        raw = emulator._decode_raw_data(emulator._read_raw_data(handler), handler)
        boundary = b"--" + content_type.split("boundary=", 1)[1].strip('"').encode()
        parts = raw[: raw.rindex(boundary + b"--")].split(boundary)[1:]
        bodies = []
        for part in parts:
            ends = [part.find(gap) + len(gap) for gap in (b"\r\n\r\n", b"\n\n") if gap in part]
            head, body = part[: min(ends)], part[min(ends) :]
            line_break = b"\r\n" if body.endswith(b"\r\n") else b"\n"
            bodies.append((head, body[: -len(line_break)]))
        (_, meta), (head, content) = bodies
        kind = next(
            (line.split(b":", 1)[1].strip().decode() for line in head.splitlines()
             if line.lower().startswith(b"content-type:")),
            "application/octet-stream",
        )  # fmt: skip
        return {"meta": json.loads(meta), "content": content, "content-type": kind}

    emulator._read_data = read_data


def start_emulator(work_dir: str) -> multiprocessing.Process:
    """The emulator in a process of its own, and this process's environment pointed at it.

    A process of its own: TensorFlow's file calls hold the GIL while they wait.
    """
    cert_path, key_path = _certificate(work_dir)
    exact_uploads()  # in this process, before the emulator's is forked from it
    emulator = multiprocessing.get_context("fork").Process(
        target=_serve, args=(cert_path, key_path), daemon=True
    )
    emulator.start()
    os.environ.update(
        CURL_CA_BUNDLE=cert_path,
        GOOGLE_AUTH_TOKEN_FOR_TESTING="emulator",
        NO_GCE_CHECK="true",
        STORAGE_EMULATOR_HOST="http://127.0.0.1:80",  # the storage layer (gcsfs)
    )
    os.environ.pop("STRATEGIST_GCS_LOCAL_ROOT", None)
    _wait_for_port(443)
    return emulator


def run_beside_emulator(script: Path, work_dir: Path, *args: str, timeout_s: float) -> dict:
    """Runs `script WORK_DIR ARGS...` in the namespaces above; the JSON of its RESULT line.

    Called by the tests; the script starts the emulator (`start_emulator`).
    """
    import subprocess

    hosts = work_dir / "hosts"
    hosts.write_text("127.0.0.1 localhost www.googleapis.com storage.googleapis.com\n")
    inside = (
        f"ip link set lo up && mount --bind {hosts} /etc/hosts && "
        f"exec {sys.executable} {script} {work_dir} {' '.join(args)}"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("STRATEGIST_GCS_LOCAL_ROOT", None)
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--net", "--mount", "sh", "-c", inside],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-4000:] + done.stderr[-4000:]
    return json.loads(lines[-1][len("RESULT ") :])


def main(work_dir: str, tfds_dir: str) -> dict:
    emulator = start_emulator(work_dir)

    import tensorflow as tf

    from components.core import datasets, storage
    from components.core.config import DataConfig

    shards = f"gs://{BUCKET}/shards"
    # Written by the storage layer (gcsfs), read by TensorFlow's GCS filesystem.
    datasets.shard_dataset("digits", shards, num_shards=2, data_dir=tfds_dir)
    manifest = datasets.load_manifest(shards, verify_records=True)
    examples = sum(int(labels.shape[0]) for _, labels in datasets.eval_dataset(manifest))
    # Written by TensorFlow, read by the storage layer.
    written = f"gs://{BUCKET}/from-tensorflow/records.tfrecord"
    with tf.io.TFRecordWriter(written) as writer:
        for index in range(3):
            writer.write(f"record {index}".encode())
    read_back = [r.numpy().decode() for r in tf.data.TFRecordDataset(written)]
    # `--data gs://.../*.tfrecord`: globbed by the storage layer, read by TensorFlow.
    for part in range(2):
        with tf.io.TFRecordWriter(f"gs://{BUCKET}/data/part-{part}.tfrecord") as writer:
            for index in range(10):
                feature = {
                    "x": tf.train.Feature(float_list=tf.train.FloatList(value=[index, part])),
                    "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[index % 2])),
                }
                writer.write(
                    tf.train.Example(
                        features=tf.train.Features(feature=feature)
                    ).SerializeToString()
                )
    spec = (
        '{"x": {"shape": [2], "dtype": "float32"}, "y": {"shape": [], "dtype": "int64", '
        '"num_classes": 2}}'
    )
    data = DataConfig(files=f"gs://{BUCKET}/data/*.tfrecord", label="y", feature_spec=spec)
    records = datasets.shard_data(data, os.path.join(work_dir, "tfrecord-shards"), log=print)
    result = {
        "tf_listdir": sorted(tf.io.gfile.listdir(shards)),
        "storage_listdir": storage.listdir(shards),
        "tf_exists_manifest": tf.io.gfile.exists(f"{shards}/{datasets.MANIFEST_NAME}"),
        "test_examples_read_by_tf": examples,
        "test_examples_in_manifest": manifest.split("test").num_examples,
        "tf_written_size_seen_by_storage": storage.size(written),
        "tf_written_size_seen_by_tf": tf.io.gfile.stat(written).length,
        "tf_records_read_back": read_back,
        "gs_tfrecord_examples_sharded": [records.split(n).num_examples for n in ("train", "test")],
    }
    emulator.terminate()
    return result


def _wait_for_port(port: int) -> None:
    import socket
    import time

    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


if __name__ == "__main__":
    result = main(sys.argv[1], sys.argv[2])
    print("RESULT " + json.dumps(result), flush=True)
    os._exit(0)
