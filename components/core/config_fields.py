"""How a run config's JSON sections become its typed dataclasses: field types and renamed keys."""

from __future__ import annotations

import dataclasses
from typing import Any

from components.core.errors import ConfigError

# The JSON types a config field of each annotation takes.
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (int, float),
    "str": (str,),
    "str | None": (str, type(None)),
    "bool": (bool,),
}


# Keys renamed in a section, read under their old name from configs written before
# (CHANGELOG.md); never written.
RENAMED_KEYS: dict[str, dict[str, str]] = {"cluster": {"devices_per_worker": "gpus_per_machine"}}


def build_section(section: type, raw: dict[str, Any], name: str) -> Any:
    """One section of a run config (`name`) from its JSON object, typed and checked.

    Raises:
        ConfigError: not an object, an unknown key, or a value of the wrong type.
    """
    if not isinstance(raw, dict):
        raise ConfigError(f"the {name!r} section of a run config is an object, got {raw!r}")
    raw = _renamed(raw, RENAMED_KEYS.get(name, {}))
    fields = {f.name: f for f in dataclasses.fields(section)}
    unknown = set(raw) - set(fields)
    if unknown:
        raise ConfigError(f"unknown key(s) in {name!r} config: {', '.join(sorted(unknown))}")
    values = {}
    for key, value in raw.items():
        kinds = _FIELD_TYPES[str(fields[key].type)]
        if int in kinds and isinstance(value, float) and value.is_integer():
            value = int(value)  # protobuf Structs (pipeline parameters) carry every number as float
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            expected = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
            raise ConfigError(f"run config {name}.{key} must be {expected}, got {value!r}")
        values[key] = value
    return section(**values)


def _renamed(raw: dict[str, Any], renames: dict[str, str]) -> dict[str, Any]:
    """`raw` with old key names read as their new ones (the new name wins when both are given)."""
    if not renames.keys() & raw.keys():
        return raw
    out = {key: value for key, value in raw.items() if key not in renames}
    for old, new in renames.items():
        if old in raw:
            out.setdefault(new, raw[old])
    return out
