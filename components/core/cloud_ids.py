"""Cloud identifiers a user types (region, project, service account, network, machine type,
image, Kubernetes service account): checked against the platform's own naming rules before
they reach a request, a host name or a pod spec.

A value that passes holds only the characters its platform allows, so it cannot name another
API host (`us-central1/../../x` in `{region}-aiplatform.googleapis.com`), carry a shell
fragment (`p;$(id)`), or add a flag (`n1-standard-8 --foo`). Each check raises one
`ConfigError` line naming the flag and the rule.

Rules (Google Cloud and Kubernetes documentation):
- project ID: lowercase letters, digits and hyphens, starting with a letter, not ending
  with a hyphen, at most 30 characters (Google creates them with 6 at least); an older
  domain-scoped ID `example.com:my-project`; or a project number
  (https://cloud.google.com/resource-manager/docs/creating-managing-projects).
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

from components.core.errors import ConfigError

_PROJECT = re.compile(
    r"^(?:[a-z0-9](?:[a-z0-9.-]{0,61}[a-z0-9])?:)?[a-z](?:[a-z0-9-]{0,28}[a-z0-9])?$|^[0-9]{1,19}$"
)
_REGION = re.compile(r"^[a-z]{2,20}-[a-z]{2,20}[0-9]{1,2}$")
_SERVICE_ACCOUNT = re.compile(
    r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?"
    r"@(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.){1,4}gserviceaccount\.com$"
)
_RFC1035_LABEL = r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?"
_NETWORK = re.compile(
    rf"^projects/(?:[0-9]{{1,19}}|[a-z][a-z0-9-]{{0,28}}[a-z0-9])/global/networks/{_RFC1035_LABEL}$"
)
_MACHINE_TYPE = re.compile(r"^[a-z][a-z0-9]{0,15}(?:-[a-z0-9]{1,16}){1,5}$")
_DNS_SUBDOMAIN = re.compile(
    r"^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*$"
)
# Docker's reference grammar (distribution/reference): an optional registry host, then
# lower-case path components (a Docker Hub name such as `img:1` has no host), a tag, a digest.
_IMAGE = re.compile(
    r"^(?:[a-z0-9][a-z0-9.\-]*(?::[0-9]+)?/)?[a-z0-9][a-z0-9._\-]*(?:/[a-z0-9][a-z0-9._\-]*)*"
    r"(?::[\w][\w.\-]{0,127})?(?:@sha256:[0-9a-f]{64})?$"
)


def _shown(value: str) -> str:
    """`value` quoted with control characters escaped (safe to print on a terminal)."""
    return ascii(value[:200])


def check_project(project: str, flag: str = "--project") -> str:
    """Returns `project` when it is a Google Cloud project ID or number."""
    if not _PROJECT.fullmatch(project):
        raise ConfigError(
            f"{flag} {_shown(project)} is not a Google Cloud project ID: lowercase letters, "
            "digits and '-', starting with a letter, at most 30 (e.g. my-project-123), or "
            "a project number"
        )
    return project


def check_region(region: str, flag: str = "--region") -> str:
    """Returns `region` when it has the form of a Google Cloud region (`us-central1`)."""
    if not _REGION.fullmatch(region):
        raise ConfigError(
            f"{flag} {_shown(region)} is not a Google Cloud region: pass one such as "
            "us-central1 or europe-west4"
        )
    return region


def vertex_endpoint(region: str) -> str:
    """The Vertex AI API host of `region`, built from a checked region only."""
    return f"{check_region(region)}-aiplatform.googleapis.com"


def check_service_account(email: str, flag: str = "--service-account") -> str:
    """Returns `email` when it is a Google Cloud service account's address."""
    if len(email) > 254 or not _SERVICE_ACCOUNT.fullmatch(email):
        raise ConfigError(
            f"{flag} {_shown(email)} is not an email of a service account: pass "
            "NAME@PROJECT.iam.gserviceaccount.com"
        )
    return email


def check_network(network: str, flag: str = "--network") -> str:
    """Returns `network` when it is `projects/NUMBER/global/networks/NAME`."""
    if not _NETWORK.fullmatch(network):
        raise ConfigError(
            f"{flag} {_shown(network)}: pass projects/PROJECT_NUMBER/global/networks/NAME "
            "(NAME: lowercase letters, digits and '-', at most 63)"
        )
    return network


def check_machine_type(machine_type: str, flag: str = "--machine-type") -> str:
    """Returns `machine_type` when it is shaped as a Compute Engine machine type."""
    if not _MACHINE_TYPE.fullmatch(machine_type):
        raise ConfigError(
            f"{flag} {_shown(machine_type)} is not a machine type: lowercase letters, digits "
            "and '-', e.g. n1-standard-8 or a2-highgpu-1g"
        )
    return machine_type


def check_image(image: str, flag: str = "--image") -> str:
    """Returns `image` when it is a container image reference (`[REGISTRY/]PATH[:TAG][@DIGEST]`)."""
    if len(image) > 512 or not _IMAGE.fullmatch(image):
        raise ConfigError(
            f"{flag} {_shown(image)} is not a container image reference; "
            "references are lower case ([REGISTRY/]PATH[:TAG]), "
            "e.g. us-docker.pkg.dev/my-project/strategist/trainer:1.0"
        )
    return image


def check_kube_service_account(name: str, flag: str = "--kube-service-account") -> str:
    """Returns `name` when it is a Kubernetes service account name (a DNS subdomain)."""
    if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        raise ConfigError(
            f"{flag} {_shown(name)} is not a Kubernetes service account name: lowercase "
            "letters, digits, '-' and '.', at most 253"
        )
    return name
