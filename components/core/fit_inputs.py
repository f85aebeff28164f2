"""What `fit` trains and validates on: the shards as `DatasetCreator`s, the validation share apart.

The training split's records feed training, less the share `--validation-fraction`
holds out (`datasets.validation_share`); that share, when there is one, is the
`validation_data` of `fit`, evaluated after each epoch in a fixed number of steps.
"""

from __future__ import annotations

from typing import Any

from components.core import datasets
from components.core.batching import Batching
from components.core.config import RunConfig


def fit_inputs(model, config: RunConfig, manifest, batching: Batching, preprocess=None) -> dict:
    """Keyword arguments of `model.fit`: `x`, and `validation_data` with `validation_steps`.

    Args:
        model: the built model (whether it takes a CSV's columns by name).
        config: the run (seed, strategy, validation fraction).
        manifest: the shards.
        batching: the run's batching (examples per step).
        preprocess: the model module's `preprocess`, mapped over each example.
    """
    import tf_keras as keras

    fraction = config.training.validation_fraction

    def creator(**part: Any):
        return keras.utils.experimental.DatasetCreator(
            datasets.make_dataset_fn(
                manifest,
                "train",
                batching.batch_per_step,
                seed=config.training.seed,
                per_worker_order=config.cluster.spec.uses_ps,
                preprocess=preprocess,
                by_name=datasets.inputs_by_name(manifest, model),
                validation_fraction=fraction,
                **part,
            )
        )

    inputs = {"x": creator()}
    if fraction:
        # The held-out records, repeated: `validation_steps` bounds each evaluation, the same
        # number of steps on every task (a DatasetCreator needs it: tf_keras 2.21 `Model.fit`).
        inputs["validation_data"] = creator(training=False, held_out=True)
        inputs["validation_steps"] = datasets.validation_steps(
            manifest, fraction, batching.batch_per_step
        )
    return inputs
