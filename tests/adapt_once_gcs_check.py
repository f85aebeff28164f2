"""A TFJob adapts once on `gs://`, on a Cloud Storage emulator; run by test_adapt_once_cloud.py.

Inside the namespaces tests/tensorflow_gcs_check.py describes (Google's hosts on
127.0.0.1, the emulator serving them), `launch.submit_cloud` submits a Kubeflow
job as it does to a cluster: the launcher builds the model module once on the
job's `gs://` shards (TensorFlow reads them) and writes the adapted layers'
state to the job's `gs://` output (the storage layer), stages the module there,
and creates the TFJob. The client that takes it stands in for the training
operator: for each replica of the exact TFJob it starts a process with that
replica's env and args that builds the model as the trainer does
(`model_build.build_compiled` on the replica's RunConfig: the shards, the staged
module and the adapted state read from `gs://`), and prints its preprocessing
layers' state. Training itself is not run here: the emulator fails the empty
uploads TensorFlow makes for folders (checkpoints, TensorBoard); the rehearsal
tests train the same job end to end.

Usage: python tests/adapt_once_gcs_check.py WORK_DIR (prints one JSON line).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from tests.tensorflow_gcs_check import BUCKET, start_emulator

REPO = Path(__file__).resolve().parents[1]
# A replica's model build, from its own trainer arguments, as `training.train` builds it.
REPLICA_BUILD = """
import json, sys
from components.core import datasets, models, trainer
from components.core.config import RunConfig
from components.core.model_build import build_compiled
from tests.test_adapt_once_cloud import layer_states

config = RunConfig.from_json(trainer.parse_args(sys.argv[1:]).config_json)
manifest = datasets.load_manifest(config.data.shards_dir)
built = build_compiled(config, manifest.input_spec, models.resolve(config.model))
print("STATES " + json.dumps({"output_dir": config.output_dir, "module": config.model.module,
                              "states": layer_states(built.model)}))
"""


class LocalOperator:
    """A TFJob client whose `create_job` builds the model in each replica's process."""

    def __init__(self, job: dict):
        self.job = job
        self.state = "Submitted"
        self.builds: dict[str, dict] = {}
        self.logs: dict[str, str] = {}

    def create_job(self, job, namespace):
        from components.core.launch.replicas import replicas_of

        for replica in replicas_of(self.job, "kubeflow"):
            done = subprocess.run(
                [sys.executable, "-c", REPLICA_BUILD, *replica.args],
                env={**os.environ, **replica.env},
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            self.logs[replica.name] = done.stdout + done.stderr
            lines = [line for line in done.stdout.splitlines() if line.startswith("STATES ")]
            if done.returncode == 0 and lines:
                self.builds[replica.name] = json.loads(lines[-1][len("STATES ") :])
        self.state = "Succeeded" if len(self.builds) == len(self.logs) else "Failed"

    def get_job(self, name, namespace, job_kind):
        condition = SimpleNamespace(type=self.state, status="True", reason="", message="")
        return SimpleNamespace(
            status=SimpleNamespace(conditions=[condition], replica_statuses=None),
            metadata=SimpleNamespace(resource_version=None),
        )

    def get_job_logs(self, name, namespace, job_kind, is_master):
        return {name: log[-3000:] for name, log in self.logs.items()}, {}

    def delete_job(self, name, namespace, job_kind):
        pass


def main(work_dir: str) -> dict:
    work = Path(work_dir)
    emulator = start_emulator(work_dir)

    from components.core import storage
    from components.core.config import ClusterConfig, DataConfig, ModelConfig, RunConfig
    from components.core.launch import build_cloud_job, submit_cloud
    from components.core.launch.cloud import CloudConfig
    from tests.test_adapt_once_cloud import (
        MARKER_ENV,
        builds,
        comparable,
        marked_module,
        shard_tumours,
    )

    shards = f"gs://{BUCKET}/shards/tumours"
    manifest = shard_tumours(work, shards)  # through the storage layer
    marker = work / "builds.txt"
    os.environ[MARKER_ENV] = str(marker)
    output = f"gs://{BUCKET}/runs/adapted"
    run = RunConfig(
        data=DataConfig(shards_dir=shards),
        model=ModelConfig(module=str(marked_module(work))),
        cluster=ClusterConfig(strategy="multi_worker_mirrored", workers=2),
        output_dir=output,
    )
    cloud = CloudConfig(target="kubeflow", image="example.com/trainer:1", job_name="adapted")
    job = build_cloud_job(run, cloud)
    operator = LocalOperator(job)
    submit_cloud(run, cloud, job=job, client=operator, log=print)
    recorded = storage.read_json(f"{output}/model_module/adapted_layers.json")
    result = {
        "train_rows": manifest.split("train").num_examples,
        "builds": builds(marker),
        "state_objects": storage.listdir(f"{output}/model_module"),
        "recorded_states": comparable(recorded),
        "replicas": {
            name: {**build, "states": comparable(build["states"])}
            for name, build in operator.builds.items()
        },
    }
    emulator.terminate()
    return result


if __name__ == "__main__":
    result = main(sys.argv[1])
    print("RESULT " + json.dumps(result), flush=True)
    os._exit(0)
