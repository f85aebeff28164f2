"""Strategy selection: topology + model -> a recommended tf.distribute strategy.

`recommend(topology, model)` weighs the candidate strategies of a `Topology` with a step-time model
(its constants fitted in `research/selection/`); measured throughput (`load_history`) outranks the
prediction. Importing the package loads none of its modules: each name loads on first use.

Modules:
the hardware (`topology`, `machine_speeds`, `device_compute`, `memory`, `model_family`); the
step-time model (`step_time`, `ranges`); the candidates (`prediction`); measurements (`history`);
the choice (`rules`, `machine_floor`, `machine_subsets`, `input_bound`, `cost`, `unknown_inputs`,
`recommendation`); the reasons (`explanation`, `summary`).
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the module of this package that defines it
_EXPORTS = {
    name: module
    for module, names in (
        ("topology", "Layout PRECISIONS Topology"),
        ("prediction", "Prediction candidates"),
        ("history", "apply_history load_history"),
        ("recommendation", "MODEL_PARALLELISM Recommendation recommend"),
    )
    for name in names.split()
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Loads the module that defines `name` on first use (PEP 562)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
