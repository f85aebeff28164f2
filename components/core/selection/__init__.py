"""Strategy selection: topology + model -> a recommended tf.distribute strategy.

`recommend(topology, model)` weighs the candidate strategies of a `Topology` with a step-time model
(its constants fitted in `research/selection/`); measured throughput (`load_history`) outranks the
prediction. Importing the package loads none of its modules: each name is loaded on first use.

Modules:

* `topology`: the hardware (`Topology`) and cluster shape (`Layout`);
* `device_compute`: the fitted constants, a device's sustained TFLOP/s, a step's compute;
* `machine_speeds`: machines of different speeds (a GPU mix, `--heterogeneous`);
* `memory`: the bytes a replica needs on one device, and the CPU machines parameter servers
  run on;
* `model_family`: FLOPs per parameter of a model family (`--model-family`);
* `step_time`: the per-step compute and communication time of each strategy, over the GPU
  links and the network a step crosses;
* `ranges`: the range around a prediction and the unknown that makes it wide;
* `prediction`: the candidate strategies of a topology, each a `Prediction`, at a batch that fits;
* `history`: measured throughput from `comparison.json` files;
* `input_bound`: candidates an input pipeline cannot keep busy;
* `machine_subsets`, `machine_floor`: fewer machines, or a mix's faster machines alone, weighed
  against all of them;
* `rules`: practitioner rules over the ranked candidates;
* `cost`: prices (money) and `--objective cost`;
* `unknown_inputs`: the answer at both ends of an assumed input;
* `explanation`: the reasons, as sentences with numbers;
* `summary`: the short answer `select` prints (`--explain` prints every reason);
* `recommendation`: `recommend` and its answer, `Recommendation`.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the module of this package that defines it
_EXPORTS = {
    "Layout": "topology",
    "PRECISIONS": "topology",
    "Topology": "topology",
    "Prediction": "prediction",
    "candidates": "prediction",
    "apply_history": "history",
    "load_history": "history",
    "MODEL_PARALLELISM": "recommendation",
    "Recommendation": "recommendation",
    "recommend": "recommendation",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Loads the module that defines `name` on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
