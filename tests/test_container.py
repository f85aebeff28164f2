"""The trainer image: lint-clean Dockerfile, build script engine detection, Cloud Build config."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONTAINERS = ROOT / "containers"
DOCKERFILE = CONTAINERS / "Dockerfile"
BUILD_SH = CONTAINERS / "build.sh"
GPU_BASE = "tensorflow/tensorflow:2.21.0-gpu"
CPU_BASE = "python:3.11-slim"


def test_hadolint_passes_on_the_dockerfile():
    hadolint = Path(sys.executable).parent / "hadolint"
    assert hadolint.exists(), f"hadolint is missing from the venv ({hadolint}): make install"
    result = subprocess.run(
        [str(hadolint), "--failure-threshold", "style", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_is_one_image_with_gpu_default_non_root_and_the_trainer_entry_point():
    text = DOCKERFILE.read_text()
    assert f"ARG BASE_IMAGE={GPU_BASE}\nFROM ${{BASE_IMAGE}}" in text
    assert CPU_BASE in text  # the CPU variant is documented where it is built
    user = re.findall(r"^USER (\S+)$", text, re.MULTILINE)
    assert user and user[-1].split(":")[0] not in ("0", "root")
    assert 'ENTRYPOINT ["python", "-m", "components.core.trainer"]' in text
    # Everything pyproject.toml needs to install is copied.
    for needed in ("pyproject.toml", "README.md", "components", "pipelines"):
        assert re.search(rf"^COPY .*\b{re.escape(needed)}\b", text, re.MULTILINE), needed
    assert "TF_USE_LEGACY_KERAS=1" in text


def test_build_context_ignore_file_keeps_only_the_sources():
    lines = (CONTAINERS / "Dockerfile.dockerignore").read_text().split("\n")
    assert "**" in lines and "!components/**" in lines and "!pipelines/**" in lines


def fake_engines(tmp_path: Path, scripts: dict[str, str]) -> dict[str, str]:
    """A PATH holding only fake engines (plus the basics build.sh uses)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("bash", "dirname", "sed", "env"):
        target = subprocess.run(["which", name], capture_output=True, text=True).stdout.strip()
        (bin_dir / name).symlink_to(target)
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!{bin_dir / 'bash'}\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return {"PATH": str(bin_dir), "HOME": str(tmp_path)}


def run_build(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BUILD_SH), *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_docker_client_without_a_daemon_is_no_engine(tmp_path):
    env = fake_engines(
        tmp_path, {"docker": 'echo "Cannot connect to the Docker daemon" >&2; exit 1'}
    )
    result = run_build(env)
    assert result.returncode == 3
    assert "docker: client found, but no daemon answers" in result.stderr
    assert "podman: not installed" in result.stderr
    assert "gcloud builds submit --config containers/cloudbuild.yaml" in result.stderr


ENGINES = ("docker", "podman", "buildah")  # build.sh's order of preference


def test_this_machine_gets_a_build_or_a_clear_refusal(tmp_path):
    """build.sh against this machine's real engines: the first that works builds, or none
    does and the refusal says each one's state. Here: a docker client without a daemon and
    no podman/buildah, so exit 3.

    Each real engine is wrapped so that detection (`docker info`, `podman info`, `buildah
    version`) asks the real one while `build` and `push` are only logged, so the engine
    branch runs in seconds without pulling base images.
    """

    found = shutil.which

    def answers(name):
        probe = ["version"] if name == "buildah" else ["info"]
        return subprocess.run([found(name), *probe], capture_output=True).returncode == 0

    expected = next((e for e in ENGINES if found(e) and answers(e)), None)
    log = tmp_path / "calls"
    shims = tmp_path / "shims"
    shims.mkdir()
    for name in ENGINES:
        if found(name):
            shim = shims / name
            shim.write_text(
                "#!/usr/bin/env bash\n"
                f'case "$1" in build|push) echo "{name} $*" >> {log}; exit 0 ;; esac\n'
                f'exec {found(name)} "$@"\n'
            )
            shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"}
    env.pop("ENGINE", None)
    result = run_build(env, "--variant", "cpu", "--tag", "reg/t:v1")
    if expected is None:
        assert result.returncode == 3, result.stdout + result.stderr
        assert "no container engine can build here" in result.stderr
        docker_state = "client found, but no daemon answers" if found("docker") else "not installed"
        assert f"docker: {docker_state}" in result.stderr
        for name in ("podman", "buildah"):
            assert (f"{name}: not installed" in result.stderr) == (not found(name)), name
        assert not log.exists()  # nothing was built
    else:
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"build.sh: {expected} building reg/t:v1-cpu (FROM {CPU_BASE})" in result.stdout
        (call,) = log.read_text().splitlines()
        assert call.startswith(f"{expected} build ") and "-t reg/t:v1-cpu " in call


def test_podman_builds_both_variants_with_the_right_base_images(tmp_path):
    log = tmp_path / "calls"
    env = fake_engines(
        tmp_path,
        {
            "docker": "exit 1",
            "podman": f'echo "$@" >> {log}; exit 0',
        },
    )
    result = run_build(env, "--tag", "reg/strategist-trainer:v1", "--push")
    assert result.returncode == 0, result.stderr
    calls = log.read_text().splitlines()
    builds = [c for c in calls if c.startswith("build ")]
    assert len(builds) == 2
    gpu, cpu = builds
    assert f"BASE_IMAGE={GPU_BASE}" in gpu and "-t reg/strategist-trainer:v1 " in gpu
    assert f"BASE_IMAGE={CPU_BASE}" in cpu and "-t reg/strategist-trainer:v1-cpu " in cpu
    for call in builds:
        assert f"-f {DOCKERFILE}" in call and call.endswith(str(ROOT))
        assert "--ignorefile" in call
    assert "push reg/strategist-trainer:v1" in calls
    assert "push reg/strategist-trainer:v1-cpu" in calls


def test_one_variant_and_bad_arguments(tmp_path):
    log = tmp_path / "calls"
    env = fake_engines(tmp_path, {"buildah": f'echo "$@" >> {log}; exit 0'})
    assert run_build(env, "--variant", "cpu").returncode == 0
    (call,) = [c for c in log.read_text().splitlines() if c.startswith("build ")]
    assert f"BASE_IMAGE={CPU_BASE}" in call
    bad = run_build(env, "--variant", "tpu")
    assert bad.returncode == 2 and "gpu, cpu or all" in bad.stderr


def test_cloudbuild_builds_and_pushes_both_variants():
    config = yaml.safe_load((CONTAINERS / "cloudbuild.yaml").read_text())
    steps = {step["id"]: step for step in config["steps"]}
    assert f"--build-arg=BASE_IMAGE={GPU_BASE}" in steps["gpu"]["args"]
    assert f"--build-arg=BASE_IMAGE={CPU_BASE}" in steps["cpu"]["args"]
    for step in steps.values():
        assert "--file=containers/Dockerfile" in step["args"]
    tags = {
        arg.split("=", 1)[1]
        for s in steps.values()
        for arg in s["args"]
        if arg.startswith("--tag=")
    }
    assert tags == set(config["images"]) == {"${_IMAGE}:${_TAG}", "${_IMAGE}:${_TAG}-cpu"}
    assert config["options"]["dynamicSubstitutions"] is True
