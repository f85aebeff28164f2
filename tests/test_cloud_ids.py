"""Cloud identifiers checked against the platforms' own naming rules (`cloud_ids`), through the
real `strategist` command: a bad one exits 2 in one line, and no request is built (a
`--dry-run` that passes prints the request it would send)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from components.core import cloud_ids
from components.core.errors import ConfigError

STRATEGIST = str(Path(sys.executable).parent / "strategist")
IMAGE = "us-docker.pkg.dev/my-project/strategist/trainer:1.0"


def vertex(**flags: str) -> list[str]:
    given = {
        "--project": "my-project",
        "--region": "us-central1",
        "--image": IMAGE,
        "--output": "gs://bucket/runs/x",
        "--shards-dir": "gs://bucket/shards",
        **flags,
    }
    return ["train", "--target", "vertex", "--dry-run", *[a for kv in given.items() for a in kv]]


def kubeflow(**flags: str) -> list[str]:
    given = {
        "--image": IMAGE,
        "--output": "gs://bucket/runs/x",
        "--shards-dir": "gs://bucket/shards",
        **flags,
    }
    return ["train", "--target", "kubeflow", "--dry-run", *[a for kv in given.items() for a in kv]]


BAD = [
    # The region went into the API host name: it chose who received the credentials.
    (vertex(**{"--region": "us-central1/../../x"}), "--region"),
    (vertex(**{"--region": "evil.example.com#"}), "--region"),
    (vertex(**{"--region": "us-central1\x1b[2J"}), "--region"),
    (vertex(**{"--region": "us-central1\n"}), "--region"),  # `$` matches before a newline
    (kubeflow(**{"--namespace": "ns\n"}), "--namespace"),
    (vertex(**{"--project": "p;$(id)"}), "--project"),
    (vertex(**{"--project": "My-Project"}), "--project"),
    (vertex(**{"--project": "a" * 31}), "--project"),
    # Google's rule: 6 to 30 characters, a letter first, no '-' last (cloud_ids' docstring).
    (vertex(**{"--project": "abcde"}), "--project"),
    (vertex(**{"--project": "my-project-"}), "--project"),
    (vertex(**{"--project": "example.com:p"}), "--project"),
    (vertex(**{"--network": "projects/abc/global/networks/my-vpc"}), "--network"),
    (vertex(**{"--service-account": "a`id`@p.iam.gserviceaccount.com"}), "--service-account"),
    (vertex(**{"--service-account": "sa@evil.com"}), "--service-account"),
    (vertex(**{"--network": "a b;c"}), "--network"),
    (vertex(**{"--network": "projects/1/global/networks/x/../../y"}), "--network"),
    (vertex(**{"--machine-type": "n1-standard-8 --foo"}), "--machine-type"),
    (vertex(**{"--ps-machine-type": "n1-standard-8;rm"}), "--ps-machine-type"),
    (vertex(**{"--image": IMAGE.replace(":1.0", ":$(id)")}), "--image"),
    (vertex(**{"--image": "Registry/Trainer"}), "--image"),
    (kubeflow(**{"--kube-service-account": 'a"; rm -rf /'}), "--kube-service-account"),
    (kubeflow(**{"--kube-service-account": "A_B"}), "--kube-service-account"),
    (kubeflow(**{"--image": "x/y:1 --privileged"}), "--image"),
]


@pytest.mark.parametrize(("argv", "flag"), BAD, ids=[f"{i}-{f}" for i, (_, f) in enumerate(BAD)])
def test_a_bad_cloud_identifier_exits_2_before_any_request(argv, flag):
    done = subprocess.run([STRATEGIST, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0], done.stderr
    assert "Traceback" not in done.stderr and "\x1b" not in done.stderr
    assert done.stdout == ""  # no request printed: none built


def test_good_identifiers_build_the_request_on_the_regions_own_host():
    argv = vertex(
        **{
            "--region": "northamerica-northeast1",
            "--project": "example.com:my-project",
            "--service-account": "trainer@my-project.iam.gserviceaccount.com",
            "--network": "projects/123456/global/networks/my-vpc",
        }
    )
    done = subprocess.run([STRATEGIST, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "(northamerica-northeast1-aiplatform.googleapis.com); nothing was sent" in done.stderr


@pytest.mark.parametrize(
    ("check", "good"),
    [
        (cloud_ids.check_region, ["us-central1", "europe-west4", "me-central2", "asia-south1"]),
        (
            cloud_ids.check_project,
            ["my-project-123", "google.com:ml-exp", "abcdef", "a" * 30, "123456789012"],
        ),
        (
            cloud_ids.check_service_account,
            [
                "sa-name@proj-1.iam.gserviceaccount.com",
                "123-compute@developer.gserviceaccount.com",
                "proj-1@appspot.gserviceaccount.com",
            ],
        ),
        (cloud_ids.check_machine_type, ["n1-standard-8", "a2-highgpu-1g", "n1-custom-8-30720"]),
        (cloud_ids.check_kube_service_account, ["default", "pipeline-runner", "a.b-c"]),
        (cloud_ids.check_image, [IMAGE, "localhost:5000/x/y@sha256:" + "a" * 64]),
    ],
)
def test_the_platforms_own_names_pass(check, good):
    for value in good:
        assert check(value) == value


def test_the_endpoint_is_built_from_a_checked_region_only():
    assert cloud_ids.vertex_endpoint("us-east4") == "us-east4-aiplatform.googleapis.com"
    for region in ("", "x", "us-central1.evil.com", "us-central1/..", "US-CENTRAL1"):
        with pytest.raises(ConfigError, match="not a Google Cloud region"):
            cloud_ids.vertex_endpoint(region)
