"""What the strategy selector needs to know about a model, measured or given.

A `ModelProfile` holds parameter counts, forward FLOPs per example, the
activation memory one example keeps for back-propagation and the largest single
variable (which bounds how evenly parameter servers can share the load).

Profiles come from three places:

* `profile_model(name)`: a registry model as built (tf_keras, random weights,
  nothing downloaded) and counted Dense/Conv MACs layer by layer; the counts
  are bundled (`data/model_profiles.json`, written by `write_bundled`), so
  sizing a registry model never imports TensorFlow.
* `PUBLISHED_PROFILES`: models of the published scaling benchmarks, with
  parameter and FLOP counts from their papers and torchvision's model zoo.
* `from_params(n)`: only a parameter count (FLOPs estimated as one multiply-add
  per weight per example, as for an MLP or a transformer token).

This module never imports kfp; it imports TensorFlow only to build a model
(a user's model module, or `write_bundled`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.core import layer_counts, storage
from components.core.config import ConfigError

BYTES_PER_VALUE = 4  # float32 weights, gradients and activations
# The largest sparse embedding table taken: ten times the largest published embedding
# model, Persia's 100 trillion parameters (Lian et al. 2021, arXiv:2111.05897), and
# 12 PB of parameter-server memory with Adam state; a larger figure is a typo.
MAX_SPARSE_EMBEDDING_PARAMS = 10**15
PROFILE_VERSION = 2  # bump when the counting rules change: old cache entries are ignored


@dataclass(frozen=True)
class ModelProfile:
    """Size and cost of one model, the selector's view of it.

    Attributes:
        name: model name (registry key, benchmark model, or `params:N`).
        params: all parameters, dense and sparse-embedding.
        flops_per_example: forward-pass FLOPs for one example (2 x MACs).
        activation_bytes_per_example: bytes of layer outputs one example keeps
            for back-propagation (float32): the summed layer outputs, of which the
            step-time model takes the share frameworks really keep, unless
            `kept_activations_given`.
        largest_variable_params: parameters of the largest single variable.
        sparse_embedding_params: parameters in sparse embedding tables (part of
            `params`), looked up a few rows per example.
        embedding_dim: width of an embedding row.
        embedding_lookups_per_example: embedding rows one example touches.
        source: where the numbers come from (`built`, a citation, or `given`).
        tensors: trainable variables (each gradient is one all-reduce or one
            fusion-buffer slot; many small tensors pay a latency each).
        estimated: the inputs `from_params` had to estimate (e.g. `flops`,
            `activations`); empty when everything was counted or given.
        compiled_metrics: metrics the model is compiled with besides its loss,
            when it was built as a run trains it; None when unknown.
        kept_activations_given: whether `activation_bytes_per_example` is a
            user's figure of what back-propagation keeps
            (`--activation-bytes-per-example`), taken as it is; False for
            Strategist's own counts and estimates, which sum every layer's output.
    """

    name: str
    params: int
    flops_per_example: float
    activation_bytes_per_example: float = 0.0
    largest_variable_params: int = 0
    sparse_embedding_params: int = 0
    embedding_dim: int = 64
    embedding_lookups_per_example: int = 1
    source: str = "given"
    tensors: int = 1
    estimated: tuple[str, ...] = ()
    compiled_metrics: int | None = None
    kept_activations_given: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.params, int) or self.params < 1:
            raise ConfigError(f"a model needs at least 1 parameter, got {self.params!r}")
        if not math.isfinite(self.flops_per_example) or self.flops_per_example <= 0:
            raise ConfigError(
                f"FLOPs per example must be a positive number, got {self.flops_per_example!r}"
            )
        if self.sparse_embedding_params < 0 or self.sparse_embedding_params > self.params:
            raise ConfigError(
                f"sparse embedding parameters must be between 0 and the model's {self.params}, "
                f"got {self.sparse_embedding_params}"
            )
        if self.embedding_dim < 1 or self.embedding_lookups_per_example < 1:
            raise ConfigError("embedding dim and lookups per example must be at least 1")
        if isinstance(self.estimated, list):  # from a JSON cache
            object.__setattr__(self, "estimated", tuple(self.estimated))

    @property
    def dense_params(self) -> int:
        """Parameters whose gradients are dense (everything but sparse embeddings)."""
        return self.params - self.sparse_embedding_params

    @property
    def gradient_bytes(self) -> int:
        """Bytes of dense gradients every replica exchanges each step."""
        return self.dense_params * BYTES_PER_VALUE

    @property
    def largest_variable_bytes(self) -> int:
        """Bytes of the largest dense variable (one parameter server holds it whole)."""
        largest = self.largest_variable_params or self.dense_params
        return min(largest, self.dense_params) * BYTES_PER_VALUE

    def embedding_rows_touched(self, examples: int) -> int:
        """Embedding rows a batch of `examples` reads and updates (at most the table)."""
        if not self.sparse_embedding_params:
            return 0
        rows = self.sparse_embedding_params // self.embedding_dim
        return min(rows, examples * self.embedding_lookups_per_example)

    def with_sparse_embedding(self, params: int, dim: int = 64, lookups: int = 1) -> ModelProfile:
        """This model plus a sparse embedding table of `params` parameters.

        Raises:
            ConfigError: for a negative size or one above `MAX_SPARSE_EMBEDDING_PARAMS`,
                a dim below 1, or a table smaller than one row.
        """
        if params < 0:
            raise ConfigError(f"--sparse-embedding-params must be 0 or more, got {params}")
        if params > MAX_SPARSE_EMBEDDING_PARAMS:
            raise ConfigError(
                f"--sparse-embedding-params {params:.3g}: more than {MAX_SPARSE_EMBEDDING_PARAMS:,}"
                ", ten times the largest published embedding model (Persia, 1e14 parameters) "
                "and 12 PB of server memory with Adam state; give the table's rows x "
                "--embedding-dim"
            )
        if dim < 1:
            raise ConfigError(f"--embedding-dim must be at least 1, got {dim}")
        if lookups < 1:
            raise ConfigError(f"--embedding-lookups-per-example must be at least 1, got {lookups}")
        if 0 < params < dim:
            raise ConfigError(
                f"--sparse-embedding-params {params:,}: a table of fewer parameters than one "
                f"row of --embedding-dim {dim} holds no row; give rows x dim parameters "
                f"(at least {dim}), or leave the table out"
            )
        if not params:
            return self
        return dataclasses.replace(
            self,
            params=self.params + params,
            sparse_embedding_params=self.sparse_embedding_params + params,
            embedding_dim=dim,
            embedding_lookups_per_example=max(1, lookups),
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# A --params model without FLOPs: the forward FLOPs per example lie between one
# multiply-add per weight (an MLP, a transformer token: 2 x params) and the weight
# reuse of a convolutional net (ResNet-50 8.2e9 / 25.6e6 = 320 x params; the
# published CNNs here span 220 (VGG-16) to 480 (Inception-v3)). The estimate is
# the geometric middle, and the selector shows the answer at both ends.
FLOPS_PER_PARAM_LOW = 2.0
FLOPS_PER_PARAM_HIGH = 480.0
FLOPS_PER_PARAM_ESTIMATE = math.sqrt(FLOPS_PER_PARAM_LOW * FLOPS_PER_PARAM_HIGH)
# Activations kept per example when none are given: on the published CNNs,
# activation bytes / forward FLOPs is 0.002 (VGG-16) to 0.013 (ResNet-50
# 1.1e8 / 8.2e9); the estimate takes 0.013, the high end, so memory errs safe, and the
# selector says what the low end would let fit.
ACTIVATION_BYTES_PER_FLOP = 0.013
ACTIVATION_BYTES_PER_FLOP_LOW = 0.002  # VGG-16: 6.0e7 / 31e9, the low end
# Tensors of a --params model: one kernel and one bias per ~1M parameters at
# most, at least 2.
PARAMS_PER_TENSOR_ESTIMATE = 1_000_000


def from_params(
    params: int,
    flops_per_example: float | None = None,
    activation_bytes_per_example: float | None = None,
    flops_per_param: float | None = None,
) -> ModelProfile:
    """A profile from a parameter count alone.

    Args:
        params: number of parameters.
        flops_per_example: forward FLOPs per example; when None, estimated as
            `flops_per_param` (default `FLOPS_PER_PARAM_ESTIMATE`) x params and
            marked as estimated.
        activation_bytes_per_example: activation bytes one example keeps for
            back-propagation, taken as it is (`kept_activations_given`); when
            None, estimated from the FLOPs (`ACTIVATION_BYTES_PER_FLOP`, a share
            of summed layer outputs) and marked as estimated.
        flops_per_param: the FLOPs-per-parameter of the estimate.

    Raises:
        ConfigError: when params is not a positive whole number.
    """
    if isinstance(params, bool) or not isinstance(params, int) or params < 1:
        raise ConfigError(f"--params must be a whole number of at least 1, got {params!r}")
    estimated = []
    if flops_per_example is None:
        flops = (flops_per_param or FLOPS_PER_PARAM_ESTIMATE) * params
        estimated.append("flops")
    else:
        flops = float(flops_per_example)
    if activation_bytes_per_example is None:
        activations = ACTIVATION_BYTES_PER_FLOP * flops
        estimated.append("activations")
    else:
        activations = float(activation_bytes_per_example)
    return ModelProfile(
        name=f"params:{params}",
        params=params,
        flops_per_example=flops,
        activation_bytes_per_example=activations,
        largest_variable_params=params,
        source="given parameter count"
        + (f"; estimated: {', '.join(estimated)}" if estimated else ""),
        tensors=max(2, math.ceil(params / PARAMS_PER_TENSOR_ESTIMATE)),
        estimated=tuple(estimated),
        kept_activations_given=activation_bytes_per_example is not None,
    )


# Models of the published scaling benchmarks (ImageNet, 1000 classes). FLOPs are
# 2 x the multiply-accumulates reported by the papers and torchvision's model
# zoo; activation bytes are float32 layer outputs per example, from the same
# layer-by-layer count `profile_model` does; the largest variable is the
# biggest kernel (VGG-16's first fully connected layer holds 103M parameters).
# Tensors are the trainable variables of the tf_keras.applications build
# (`len(model.trainable_weights)`); ResNeXt's are counted from its architecture
# (104 bias-free convolutions with batch-norm gamma and beta, the classifier's
# kernel and bias; SE adds two dense layers with biases to each of 33 blocks).
PUBLISHED_PROFILES: dict[str, ModelProfile] = {
    p.name: p
    for p in (
        ModelProfile(
            "resnet50",
            25_557_032,
            8.2e9,
            1.1e8,
            2_359_296,
            source="He et al. 2016; torchvision",
            tensors=214,
        ),
        ModelProfile(
            "resnet101",
            44_549_160,
            15.7e9,
            1.7e8,
            2_359_296,
            source="He et al. 2016; torchvision",
            tensors=418,
        ),
        ModelProfile(
            "resnet152",
            60_192_808,
            23.1e9,
            2.4e8,
            2_359_296,
            source="He et al. 2016; torchvision",
            tensors=622,
        ),
        ModelProfile(
            "inception_v3",
            23_834_568,
            11.5e9,
            1.4e8,
            2_048_000,
            source="Szegedy et al. 2016 (299x299); torchvision",
            tensors=190,
        ),
        ModelProfile(
            "vgg16",
            138_357_544,
            31.0e9,
            6.0e7,
            102_760_448,
            source="Simonyan & Zisserman 2015; torchvision",
            tensors=32,
        ),
        ModelProfile(
            "resnext101_32x4d",
            44_177_704,
            15.6e9,
            2.0e8,
            2_048_000,
            source="Xie et al. 2017, Table 3 (7.8 GFLOPs as multiply-adds); "
            "activations estimated as ResNet-101's scaled by FLOPs",
            tensors=314,
        ),
        ModelProfile(
            "se_resnext101_32x4d",
            48_955_416,
            16.0e9,
            2.0e8,
            2_048_000,
            source="Hu et al. 2018, Table 2 (8.00 GFLOPs as multiply-adds); "
            "activations estimated as ResNeXt-101's",
            tensors=446,
        ),
        # BERT-large fine-tuned on SQuAD at 384 tokens: forward FLOPs are 2 x the
        # 302M non-embedding weights x 384 tokens plus attention (24 layers x
        # 4 x 384^2 x 1024); activations per layer are s h (34 + 5 a s / h) bytes
        # in 16 bits (Korthikanti et al. 2022, eq. 1; s 384, h 1024, a 16 heads),
        # doubled for float32; tensors are 16 per layer, 5 embedding, 2 head.
        ModelProfile(
            "bert_large_squad",
            340_000_000,
            2.46e11,
            1.2e9,
            31_254_528,
            source="Devlin et al. 2019 (340M parameters); FLOPs and activations computed",
            tensors=391,
        ),
        # BERT-large pre-training at 128 and 512 tokens, by the same formulas as
        # bert_large_squad (the masked-LM head adds under 1 % of the FLOPs); tensors
        # add the pre-training heads' 7 (transform kernel and bias, its layer norm,
        # the output bias, next-sentence kernel and bias).
        ModelProfile(
            "bert_large_pretrain_seq128",
            340_000_000,
            7.89e10,
            2.8e8,
            31_254_528,
            source="Devlin et al. 2019; FLOPs and activations computed for 128 tokens",
            tensors=398,
        ),
        ModelProfile(
            "bert_large_pretrain_seq512",
            340_000_000,
            3.35e11,
            1.9e9,
            31_254_528,
            source="Devlin et al. 2019; FLOPs and activations computed for 512 tokens",
            tensors=398,
        ),
    )
}


# Registry models' profiles, counted once by `write_bundled` (run
# `python -m components.core.model_profile` after changing a registry model or the
# counting rules; tests/test_model_profile.py checks the file against a live count), so
# that sizing a registry model needs no TensorFlow.
BUNDLED_PATH = Path(__file__).parent / "data" / "model_profiles.json"
BUNDLED_CLASSES = 10


def profile_model(name: str, num_classes: int = BUNDLED_CLASSES) -> ModelProfile:
    """The profile of registry model `name` for its default input shape, without TensorFlow.

    Read from the bundled profiles (`BUNDLED_PATH`); only the classifier head
    depends on `num_classes`, so its parameters, FLOPs and activations are
    scaled from the bundled count.

    Args:
        name: a key of `components.core.models.MODELS`.
        num_classes: outputs of the classifier head.

    Raises:
        ConfigError: for a name the registry does not hold.
    """
    from components.core import models

    models.check_model_name(name)
    entry = _bundled()[name]
    profile = ModelProfile(**entry["profile"])
    head_inputs, extra = entry["head_inputs"], num_classes - BUNDLED_CLASSES
    shape = "x".join(map(str, models.DEFAULT_INPUT_SHAPES[name]))
    return dataclasses.replace(
        profile,
        params=profile.params + extra * (head_inputs + 1),  # kernel column and bias per class
        flops_per_example=profile.flops_per_example + 2.0 * extra * head_inputs,
        activation_bytes_per_example=profile.activation_bytes_per_example + extra * BYTES_PER_VALUE,
        largest_variable_params=max(
            entry["largest_body_variable_params"], head_inputs * num_classes
        ),
        source=_built_source(shape, num_classes),
    )


@functools.lru_cache(maxsize=1)
def _bundled() -> dict[str, Any]:
    data = json.loads(BUNDLED_PATH.read_text())
    if data.get("version") != PROFILE_VERSION:
        raise RuntimeError(
            f"{BUNDLED_PATH} holds counting rules v{data.get('version')}, this code counts by "
            f"v{PROFILE_VERSION}: run `python -m components.core.model_profile`"
        )
    return data["models"]


def _built_source(shape: str, num_classes: int) -> str:
    return f"built (tf_keras, input {shape}, {num_classes} classes)"


def write_bundled(path: Path = BUNDLED_PATH) -> dict[str, Any]:
    """Builds every registry model, counts it and writes the bundled profiles; returns them."""
    from components.core import models

    entries = {}
    for name, shape in models.DEFAULT_INPUT_SHAPES.items():
        profile, head_inputs, body_largest = _build_and_count(name, BUNDLED_CLASSES, shape)
        entries[name] = {
            "profile": profile.to_dict(),
            "head_inputs": head_inputs,
            "largest_body_variable_params": body_largest,
        }
    data = {"version": PROFILE_VERSION, "classes": BUNDLED_CLASSES, "models": entries}
    storage.write_text(str(path), json.dumps(data, indent=1, sort_keys=True) + "\n")
    return data


def profile_for(
    model, shards_dir: str | None = None, *, validation_fraction: float = 0.0
) -> ModelProfile:
    """The profile of a run's model (`RunConfig.model`): a built-in, or the user's module.

    With shards, the model is built as the run trains it, for the shards'
    examples (a built-in's input shape and classes come from the data too),
    and counted: its size, its trainable tensors and the metrics it compiles.
    `spec.training_data()` is the training split less the `validation_fraction`
    share, as the run adapts on it. Nothing is cached (a module's file may
    change). Without shards, a built-in's bundled profile (default input, 10 classes).

    Raises:
        ConfigError: an unknown built-in, a module without shards to size it,
            or a module that fails to build (naming its file and line).
    """
    if not shards_dir and model.module:
        raise ConfigError(f"profiling model module {model.module} needs the shards it trains on")
    if not shards_dir:
        return profile_model(model.name)
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    from components.core import adapt_once, datasets, model_build, models

    manifest = datasets.load_manifest(shards_dir)
    module = models.resolve(model)
    spec = adapt_once.with_training_split(manifest, module.preprocess, validation_fraction)
    built = model_build.build_model(module, spec)
    macs, activations = layer_counts.count_macs_and_activations(built)
    # A lookup layer's vocabulary is tracked as a weight without a shape.
    shapes = [w.shape for w in built.weights if hasattr(w, "shape")]
    return ModelProfile(
        name=model.name,
        params=int(built.count_params()),
        flops_per_example=float(max(2 * macs, 1)),
        activation_bytes_per_example=float(activations * BYTES_PER_VALUE),
        largest_variable_params=max(map(layer_counts.element_count, shapes), default=0),
        source=f"built from {model.module or model.name} for {', '.join(spec.features)}",
        tensors=max(1, len(built.trainable_weights)),
        compiled_metrics=model_build.compiled_metric_count(module, built, spec),
    )


def _build_and_count(
    name: str, num_classes: int, shape: tuple[int, ...]
) -> tuple[ModelProfile, int, int]:
    """Builds registry model `name` and counts it (TensorFlow).

    Returns:
        The profile, the inputs of its classifier head (the last Dense layer)
        and the largest variable outside that head.
    """
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    from components.core import models

    model = models.build_model(name, shape, num_classes)
    macs, activations = layer_counts.count_macs_and_activations(model)
    head = model.layers[-1]
    head_kernel = id(head.kernel)
    sizes = [int(layer_counts.element_count(w.shape)) for w in model.weights]
    body = [int(layer_counts.element_count(w.shape)) for w in model.weights if id(w) != head_kernel]
    profile = ModelProfile(
        name=name,
        params=int(model.count_params()),
        tensors=max(1, len(model.trainable_weights)),
        flops_per_example=float(max(2 * macs, 1)),
        activation_bytes_per_example=float(activations * BYTES_PER_VALUE),
        largest_variable_params=max(sizes, default=0),
        source=_built_source("x".join(map(str, shape)), num_classes),
    )
    return profile, int(head.kernel.shape[0]), max(body, default=0)


if __name__ == "__main__":
    written = write_bundled()
    print(f"wrote {BUNDLED_PATH}: {', '.join(written['models'])}")
