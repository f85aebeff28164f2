"""The price table: hourly prices of machine types and GPUs, as `select` and a comparison
read them (`data/prices.json`, or a user's table in its layout)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.core.errors import ReportError
from components.core.hardware import GPUS
from components.core.json_input import read_json

DEFAULT_PRICES_PATH = Path(__file__).parent / "data" / "prices.json"


@dataclass(frozen=True)
class PriceTable:
    """Hourly prices of machine types and accelerators.

    Attributes:
        as_of: the date the prices were taken (ISO format).
        source: where they were taken from.
        machine_types: machine type -> USD per hour for one machine.
        bundled_gpus: machine type -> GPUs included in its price (a2, g2, ...).
        accelerators: GPU name as users type it (`t4`) -> USD per hour for one GPU.
        default_machine_type: what a local run is priced as when its hardware
            record names no machine type.
        currency: currency of all prices.
        caveat: what the prices leave out.
        convention: how local rehearsal runs are priced, in words.
        spot_machine_types: machine type -> USD per hour on Spot (preemptible),
            for the entries that give `spot_usd_per_hour`.
        spot_accelerators: GPU name -> USD per hour on Spot, likewise.
    """

    as_of: str
    source: str
    machine_types: Mapping[str, float]
    bundled_gpus: Mapping[str, int] = field(default_factory=dict)
    accelerators: Mapping[str, float] = field(default_factory=dict)
    default_machine_type: str = "n1-standard-4"
    currency: str = "USD"
    caveat: str = ""
    convention: str = ""
    spot_machine_types: Mapping[str, float] = field(default_factory=dict)
    spot_accelerators: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], origin: str = "price table") -> PriceTable:
        """Builds a table from the layout of `data/prices.json`.

        Raises:
            ReportError: when a section or price is missing or not a number.
        """
        if not isinstance(raw, Mapping):
            raise ReportError(f"{origin}: expected a JSON object")
        for key in ("as_of", "source", "machine_types"):
            if key not in raw:
                raise ReportError(f"{origin}: missing {key!r}")
        machine_entries = _section(raw, "machine_types", origin, "machine type")
        machine_types: dict[str, float] = {}
        bundled: dict[str, int] = {}
        for name, entry in machine_entries.items():
            machine_types[name] = _price(entry, f"{origin}: machine type {name!r}")
            if isinstance(entry, Mapping) and entry.get("bundled_gpus"):
                bundled[name] = _bundled_gpus(entry["bundled_gpus"], origin, name)
        accelerator_entries = {
            name.lower(): entry
            for name, entry in _section(raw, "accelerators", origin, "GPU name (t4)").items()
        }
        accelerators = {
            name: _price(entry, f"{origin}: accelerator {name!r}")
            for name, entry in accelerator_entries.items()
        }
        local = raw.get("local_rehearsal", {})
        if not isinstance(local, Mapping):
            raise ReportError(
                f'{origin}: "local_rehearsal" must be an object '
                f'({{"default_machine_type": ..., "convention": ...}}), got {_kind(local)}'
            )
        default = str(local.get("default_machine_type", "n1-standard-4"))
        if default not in machine_types:
            raise ReportError(f"{origin}: default machine type {default!r} has no price")
        return cls(
            as_of=str(raw["as_of"]),
            source=str(raw["source"]),
            machine_types=machine_types,
            bundled_gpus=bundled,
            accelerators=accelerators,
            default_machine_type=default,
            currency=_currency(raw.get("currency", "USD"), origin),
            caveat=str(raw.get("caveat", "")),
            convention=str(local.get("convention", "")),
            spot_machine_types=_spot_prices(machine_entries, f"{origin}: machine type"),
            spot_accelerators=_spot_prices(accelerator_entries, f"{origin}: accelerator"),
        )

    @property
    def has_spot_prices(self) -> bool:
        """Whether any entry gives a Spot price."""
        return bool(self.spot_machine_types or self.spot_accelerators)

    def machine_price(self, machine_type: str, spot: bool = False) -> float | None:
        """USD per hour for one machine of `machine_type`, on Spot when `spot`.

        An entry without `spot_usd_per_hour` has no Spot price, so a machine
        that needs one is left unpriced rather than priced on demand.
        """
        return (self.spot_machine_types if spot else self.machine_types).get(machine_type)

    def accelerator_price(self, gpu: str, spot: bool = False) -> float | None:
        """USD per hour for one GPU, by user name (`t4`) or Vertex enum (`NVIDIA_TESLA_T4`),
        on Spot when `spot`."""
        table = self.spot_accelerators if spot else self.accelerators
        key = gpu.lower()
        if key in table:
            return table[key]
        for spec in GPUS.values():
            if key in (spec.vertex_accelerator.lower(), spec.gke_accelerator.lower()):
                return table.get(spec.name)
        return None

    def describe(self) -> dict[str, Any]:
        """What a report records about the prices it used."""
        return {
            "as_of": self.as_of,
            "source": self.source,
            "currency": self.currency,
            "default_machine_type": self.default_machine_type,
            "convention": self.convention,
            "caveat": self.caveat,
        }


def _section(raw: Mapping[str, Any], key: str, origin: str, names: str) -> Mapping[str, Any]:
    """The object `raw[key]` of name -> price entry ({} when absent).

    Raises:
        ReportError: naming `origin` and `key` when it is not a JSON object.
    """
    section = raw.get(key, {})
    if not isinstance(section, Mapping):
        raise ReportError(
            f'{origin}: "{key}" must be an object of {names} -> price (a number of USD per '
            f'hour, or {{"usd_per_hour": ...}}), got {_kind(section)}'
        )
    return section


def _bundled_gpus(value: Any, origin: str, machine_type: str) -> int:
    """The GPUs a machine type's price includes.

    Raises:
        ReportError: naming the machine type when `value` is not a whole number of at least 1.
    """
    if not _is_number(value) or value != int(value) or value < 1:
        raise ReportError(
            f"{origin}: machine type {machine_type!r}: bundled_gpus must be the whole number "
            f"of GPUs its price includes, got {value!r}"
        )
    return int(value)


def _kind(value: Any) -> str:
    """What a JSON value is, for a message: `a list`, `null`, `a string`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    kinds = {list: "a list", str: "a string", int: "a number", float: "a number"}
    return kinds.get(type(value), f"a {type(value).__name__}")


def _price(entry: Any, what: str) -> float:
    """USD per hour from a price entry: a number or an object with `usd_per_hour`.

    Raises:
        ReportError: naming `what` when the price is missing, negative or not a number.
    """
    value = entry.get("usd_per_hour") if isinstance(entry, Mapping) else entry
    if not _is_number(value) or value < 0:
        raise ReportError(f"{what}: price must be a number of USD per hour, got {value!r}")
    return float(value)


def _currency(value: Any, origin: str) -> str:
    """The table's currency code, e.g. `USD` or `EUR`.

    Raises:
        ReportError: anything but three letters.
    """
    if not (isinstance(value, str) and len(value) == 3 and value.isalpha()):
        raise ReportError(
            f'{origin}: "currency" must be a three-letter code such as "USD", got {value!r}'
        )
    return value.upper()


def _spot_prices(entries: Mapping[str, Any], what: str) -> dict[str, float]:
    """The `spot_usd_per_hour` of the entries that give one.

    Raises:
        ReportError: naming `what` when a Spot price is negative or not a number.
    """
    return {
        name: _price({"usd_per_hour": entry["spot_usd_per_hour"]}, f"{what} {name!r} (Spot)")
        for name, entry in dict(entries).items()
        if isinstance(entry, Mapping) and "spot_usd_per_hour" in entry
    }


def load_prices(path: str | os.PathLike[str] | None = None) -> PriceTable:
    """Loads a price table; the bundled `components/core/data/prices.json` by default.

    Args:
        path: a JSON file in the layout of the bundled one.

    Returns:
        The price table.

    Raises:
        ReportError: when the file cannot be read or is not a valid price table.
    """
    target = Path(path) if path is not None else DEFAULT_PRICES_PATH
    return PriceTable.from_dict(read_json(target, "price table"), origin=str(target))


def _is_number(value: Any) -> bool:
    """Whether `value` is a finite int or float (booleans are not numbers)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
