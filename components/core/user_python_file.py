"""A user's `.py` file named by a flag (`--model-module`, `--dataset-module`), checked
before it is imported.

Python imports only a `.py` file: `importlib.util.spec_from_file_location` has no
loader for another name (it returns None) and a folder is no file, so each is
refused with what to pass instead of failing inside the import machinery. A
`gs://` file is read through `storage`: its server is probed first
(`storage_access.check_readable`), as gcsfs retries an unreachable one for most of a
minute, and a refused read becomes `storage_access.unreadable`'s one line.
"""

from __future__ import annotations

from components.core import storage, storage_access
from components.core.errors import ConfigError


def check_local(path: str, flag: str, source: str | None = None) -> None:
    """Refuses a local path that is not an existing `.py` file.

    Args:
        path: the file on this machine.
        flag: the flag that named it, for the message.
        source: what the user passed, when it differs from `path` (a fetched copy).

    Raises:
        ConfigError: a folder, a missing file, or a file of another kind.
    """
    named = source or path
    if storage.isdir(path):
        raise ConfigError(f"{flag} {named} is a folder: pass the path of a .py file")
    if not storage.isfile(path):
        raise ConfigError(f"{flag} {named}: no such file: pass the path of a .py file")
    if not path.endswith(".py"):
        raise ConfigError(f"{flag} {named}: not a .py file: pass the path of a .py file")


def read_remote(uri: str, flag: str) -> bytes:
    """The content of a `gs://` `.py` file.

    Raises:
        ConfigError: its server cannot be reached, it cannot be read
            (credentials, access), it does not exist, or it is not a `.py` file.
    """
    if not uri.endswith(".py"):
        raise ConfigError(f"{flag} {uri}: not a .py file: pass the path of a .py file")
    storage_access.check_readable(uri, flag)
    try:
        return storage.read_bytes(uri)
    except FileNotFoundError:
        raise ConfigError(f"{flag} {uri}: no such file: pass the path of a .py file") from None
    except Exception as err:  # gcsfs: credentials, permissions, a failed request
        raise storage_access.unreadable(uri, flag, err) from None
