"""Vertex AI Reduction Server: what a job that uses it needs of the training image.

Reduction Server replicas (worker pool 2) aggregate the workers' gradients
through NCCL, so every GPU worker's image must carry NCCL 2.7 or later and the
`google-reduction-server` package, its NCCL plugin:
https://cloud.google.com/vertex-ai/docs/training/distributed-training#reduction-server
Strategist's GPU image installs it (containers/Dockerfile, `REDUCTION_SERVER=1`);
the CPU variant, tagged `-cpu`, has no NCCL and does not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping

from components.core.errors import ConfigError

# Set on every training process of a job with Reduction Server replicas.
JOB_ENV = "STRATEGIST_REDUCTION_SERVER"
PLUGIN_PACKAGE = "google-reduction-server"
# The tag suffix of the image variant without NCCL (containers/build.sh).
CPU_IMAGE_SUFFIX = "-cpu"


def image_errors(image: str) -> list[str]:
    """What is wrong with `image` for a Reduction Server job, seen from its name."""
    if image.endswith(CPU_IMAGE_SUFFIX):
        return [
            f"--reduction-server needs the GPU image (NCCL and the {PLUGIN_PACKAGE} plugin), "
            f"not the CPU variant {image}: pass --image with the tag without {CPU_IMAGE_SUFFIX}"
        ]
    return []


def plugin_installed() -> bool:
    """Whether this machine has the plugin's Debian package installed."""
    dpkg_query = shutil.which("dpkg-query")
    if not dpkg_query:
        return False
    done = subprocess.run(
        [dpkg_query, "-W", "-f=${Status}", PLUGIN_PACKAGE],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode == 0 and done.stdout.strip() == "install ok installed"


def check_this_process(environ: Mapping[str, str] = os.environ) -> None:
    """Refuses to train in a Reduction Server job on an image without the plugin.

    Without it NCCL all-reduces among the workers alone and the Reduction
    Server replicas idle while billed; failing before TensorFlow starts says
    so in a second.

    Raises:
        ConfigError: the job uses Reduction Server and the plugin is missing.
    """
    if environ.get(JOB_ENV) == "1" and not plugin_installed():
        raise ConfigError(
            f"this job uses Vertex AI Reduction Server but the image lacks its NCCL plugin "
            f"(Debian package {PLUGIN_PACKAGE}): build the image with containers/build.sh "
            "(the GPU variant installs it) or drop --reduction-server"
        )
