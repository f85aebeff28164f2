"""Cloud identifiers a user types (region, project, service account, network, machine type,
image, Kubernetes service account): checked against the platform's own naming rules before
they reach a request, a host name or a pod spec.

A value that passes holds only the characters its platform allows, so it cannot name another
API host (`us-central1/../../x` in `{region}-aiplatform.googleapis.com`), carry a shell
fragment (`p;$(id)`), or add a flag (`n1-standard-8 --foo`). Each check raises one
`ConfigError` line naming the flag and the rule.

Rules (Google Cloud and Kubernetes documentation):
- project ID: 6 to 30 characters, lowercase letters, digits and hyphens, starting with a
  letter, not ending with a hyphen ("A project ID has the following requirements: Must be 6
  to 30 characters in length. Can only contain lowercase letters, numbers, and hyphens. Must
  start with a letter. Cannot end with a hyphen.",
  https://cloud.google.com/resource-manager/docs/creating-managing-projects); an older
  domain-scoped ID `example.com:my-project` (the same rule after the colon); or a project
  number.
- region: `AREA-DIRECTIONN`, e.g. `us-central1`, `europe-west4`,
  `northamerica-northeast1` (https://cloud.google.com/vertex-ai/docs/general/locations).
- service account: `NAME@DOMAIN.gserviceaccount.com` (`iam.`, `developer.`, `appspot.`);
  the name is 6-30 lowercase letters, digits and hyphens for user-made accounts
  (https://cloud.google.com/iam/docs/service-accounts-create).
- VPC network: `projects/PROJECT_NUMBER/global/networks/NAME`, NAME an RFC 1035 label
  (https://cloud.google.com/vertex-ai/docs/general/vpc-peering).
- machine type: lowercase letters, digits and hyphens (`n1-standard-8`,
  `a2-highgpu-1g`, `n1-custom-8-30720`).
- Kubernetes service account: an RFC 1123 DNS subdomain, at most 253 characters
  (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from components.core.errors import ConfigError


@dataclass(frozen=True)
class _Rule:
    """One kind of identifier: the pattern a value must match whole, and the words a refusal
    uses (`FLAG VALUE is not WHAT: RULE`)."""

    pattern: re.Pattern[str]
    what: str
    rule: str
    max_length: int = 512


_RFC1035_LABEL = r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?"
# 6-30 characters: a letter, 4-28 of letters, digits and '-', a letter or digit.
_PROJECT_ID = r"[a-z][a-z0-9-]{4,28}[a-z0-9]"
_RULES = {
    "project": _Rule(
        re.compile(rf"(?:[a-z0-9](?:[a-z0-9.-]{{0,61}}[a-z0-9])?:)?{_PROJECT_ID}|[0-9]{{1,19}}"),
        "a Google Cloud project ID",
        "6 to 30 lowercase letters, digits and '-', starting with a letter and not ending "
        "with '-' (e.g. my-project-123), or a project number",
    ),
    "region": _Rule(
        re.compile(r"[a-z]{2,20}-[a-z]{2,20}[0-9]{1,2}"),
        "a Google Cloud region",
        "pass one such as us-central1 or europe-west4",
    ),
    "service_account": _Rule(
        re.compile(
            r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?"
            r"@(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.){1,4}gserviceaccount\.com"
        ),
        "an email of a service account",
        "pass NAME@PROJECT.iam.gserviceaccount.com",
        max_length=254,
    ),
    "network": _Rule(
        re.compile(rf"projects/(?:[0-9]{{1,19}}|{_PROJECT_ID})/global/networks/{_RFC1035_LABEL}"),
        "a VPC network",
        "pass projects/PROJECT_NUMBER/global/networks/NAME (NAME: lowercase letters, digits "
        "and '-', at most 63)",
    ),
    "machine_type": _Rule(
        re.compile(r"[a-z][a-z0-9]{0,15}(?:-[a-z0-9]{1,16}){1,5}"),
        "a machine type",
        "lowercase letters, digits and '-', e.g. n1-standard-8 or a2-highgpu-1g",
    ),
    # Docker's reference grammar (distribution/reference): an optional registry host, then
    # lower-case path components (a Docker Hub name such as `img:1` has no host), a tag, a
    # digest.
    "image": _Rule(
        re.compile(
            r"(?:[a-z0-9][a-z0-9.\-]*(?::[0-9]+)?/)?[a-z0-9][a-z0-9._\-]*"
            r"(?:/[a-z0-9][a-z0-9._\-]*)*(?::[\w][\w.\-]{0,127})?(?:@sha256:[0-9a-f]{64})?"
        ),
        "a container image reference",
        "references are lower case ([REGISTRY/]PATH[:TAG]), "
        "e.g. us-docker.pkg.dev/my-project/strategist/trainer:1.0",
    ),
    "kube_service_account": _Rule(
        re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*"),
        "a Kubernetes service account name",
        "lowercase letters, digits, '-' and '.', at most 253",
        max_length=253,
    ),
}


def _shown(value: str) -> str:
    """`value` quoted with control characters escaped (safe to print on a terminal)."""
    return ascii(value[:200])


def _check(kind: str, value: str, flag: str) -> str:
    """Returns `value` when it is an identifier of `kind` (`_RULES`), else refuses it.

    Raises:
        ConfigError: `FLAG VALUE is not WHAT: RULE`, in one line.
    """
    rule = _RULES[kind]
    # `fullmatch`, not `$`: `$` also matches before a trailing newline.
    if len(value) > rule.max_length or not rule.pattern.fullmatch(value):
        raise ConfigError(f"{flag} {_shown(value)} is not {rule.what}: {rule.rule}")
    return value


def check_project(project: str, flag: str = "--project") -> str:
    """Returns `project` when it is a Google Cloud project ID or number."""
    return _check("project", project, flag)


def check_region(region: str, flag: str = "--region") -> str:
    """Returns `region` when it has the form of a Google Cloud region (`us-central1`)."""
    return _check("region", region, flag)


def vertex_endpoint(region: str) -> str:
    """The Vertex AI API host of `region`, built from a checked region only."""
    return f"{check_region(region)}-aiplatform.googleapis.com"


def check_service_account(email: str, flag: str = "--service-account") -> str:
    """Returns `email` when it is a Google Cloud service account's address."""
    return _check("service_account", email, flag)


def check_network(network: str, flag: str = "--network") -> str:
    """Returns `network` when it is `projects/NUMBER/global/networks/NAME`."""
    return _check("network", network, flag)


def check_machine_type(machine_type: str, flag: str = "--machine-type") -> str:
    """Returns `machine_type` when it is shaped as a Compute Engine machine type."""
    return _check("machine_type", machine_type, flag)


def check_image(image: str, flag: str = "--image") -> str:
    """Returns `image` when it is a container image reference (`[REGISTRY/]PATH[:TAG][@DIGEST]`)."""
    return _check("image", image, flag)


def check_kube_service_account(name: str, flag: str = "--kube-service-account") -> str:
    """Returns `name` when it is a Kubernetes service account name (a DNS subdomain)."""
    return _check("kube_service_account", name, flag)
