"""Google Cloud credentials for the API calls a command makes (Vertex AI jobs and pipelines)."""

from __future__ import annotations

from typing import Any

from components.core.config import ConfigError


def google_credentials() -> Any:
    """Application Default Credentials, or a ConfigError that says how to get them."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        credentials, _ = google.auth.default(
            scopes=["https://www.googleapis.com/auth/cloud-platform"]
        )
    except DefaultCredentialsError as err:
        raise ConfigError(
            f"no Google Cloud credentials ({err}): run `gcloud auth application-default login`, "
            "or set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file"
        ) from None
    return credentials
