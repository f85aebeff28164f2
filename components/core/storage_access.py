"""Whether a user's `gs://` path can be read from here, refused in one line, not after retries."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

from components.core import storage
from components.core.errors import ConfigError

# Cloud Storage's JSON API endpoint (https://cloud.google.com/storage/docs/request-endpoints).
API_ADDRESS = ("storage.googleapis.com", 443)


def reachable(address: tuple[str, int], timeout_s: float) -> bool:
    """True when a TCP connection to `address` opens within `timeout_s`."""
    try:
        with socket.create_connection(address, timeout=timeout_s):
            return True
    except OSError:
        return False


def check_readable(uri: str, flag: str, timeout_s: float = 3.0) -> None:
    """Refuses, in seconds, a `gs://` URI whose server cannot be reached from here.

    gcsfs retries a failed connection for most of a minute before it raises,
    so the address is probed first; the emulator's when one is set.

    Raises:
        ConfigError: the server is unreachable, with what to do.
    """
    if not storage.is_remote(uri):
        return
    address = API_ADDRESS
    emulator = os.environ.get(storage.EMULATOR_ENV)
    if emulator:
        parts = urlsplit(emulator if "://" in emulator else "http://" + emulator)
        address = (parts.hostname or "localhost", parts.port or 80)
    if not reachable(address, timeout_s):
        raise ConfigError(
            f"{flag} {uri}: cannot reach Cloud Storage ({address[0]}:{address[1]}): check the "
            "network, or copy the files here and pass a local path"
        )


def unreadable(uri: str, flag: str, err: Exception) -> ConfigError:
    """The one-line refusal of a `gs://` URI whose reading failed (credentials, access)."""
    reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return ConfigError(
        f"{flag} {uri}: cannot read it ({type(err).__name__}: {reason[:160]}): check your "
        "credentials (gcloud auth application-default login) and access to the bucket, "
        "or pass a local path"
    )


@contextlib.contextmanager
def reading(uri: str, flag: str) -> Iterator[None]:
    """Reads `uri` inside: its server probed first (`check_readable`), since gcsfs
    retries an unreachable one for most of a minute, and a failed `gs://` read
    (credentials, permissions, a failed request) refused in one line (`unreadable`).

    Raises:
        ConfigError: as `check_readable`, or `unreadable` for a failed remote read.
    """
    check_readable(uri, flag)
    try:
        yield
    except ConfigError:
        raise
    except Exception as err:
        if not storage.is_remote(uri):
            raise
        raise unreadable(uri, flag, err) from None
