"""Flags shared by the subcommands that describe a run (`train`, `compare`)."""

from __future__ import annotations

import argparse
import datetime
import os

from components.core import models, storage
from components.core.config import (
    ALL_REDUCE,
    MAX_SEED,
    MAX_STEPS_PER_EXECUTION,
    PRECISIONS,
    ClusterConfig,
    ConfigError,
    DataConfig,
    ModelConfig,
    RunConfig,
    TrainingConfig,
    per_replica_from_global,
    validate_run,
)
from components.core.hardware import GPUS
from components.core.strategy_spec import spec_for
from pipelines.cli.arg_types import (
    bounded_int,
    fraction,
    fraction_or_zero,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    seed,
)

# One default per setting, in every subcommand that takes it.
DEFAULT_BATCH_SIZE = TrainingConfig().per_replica_batch_size
# The GPU a recommendation is made for (select, compare, the pipelines' `gpu`).
DEFAULT_TARGET_GPU = "t4"
# The GPU types every command's --gpu takes, as its --help lists them (one list).
GPU_NAMES = ", ".join(GPUS)


def add_gpus_per_machine_argument(
    parser, *, older: str, help: str, parse=positive_int, default=None
) -> None:
    """`--gpus-per-machine`, the one name of GPUs per machine in every subcommand.

    `older` is the name a subcommand used before (`--devices`, `--gpus`): still
    parsed into the same value so scripts keep working, but not shown.
    """
    parser.add_argument(
        "--gpus-per-machine",
        dest="gpus_per_machine",
        type=parse,
        default=default,
        metavar="N",
        help=help,
    )
    hidden = argparse.SUPPRESS
    parser.add_argument(older, dest="gpus_per_machine", type=parse, default=hidden, help=hidden)


def add_train_step_gpus_argument(parser: argparse.ArgumentParser) -> None:
    """`--gpus-per-machine` of a compiled pipeline's train step (compile, submit, schedule).

    Its default is 1, not the `mirrored` rule of `train`: the strategy of a
    pipeline run is chosen when it runs, after the step's machine is.
    """
    add_gpus_per_machine_argument(
        parser,
        older="--gpus",
        default=1,
        help="GPUs on the train step's machine (with --gpu) or else on the cloud job's "
        "machines, also the pipelines' gpus_per_machine default; 1, not train's 2 under "
        "mirrored, since a pipeline chooses its strategy when it runs (default: 1)",
    )


def add_data_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Data, model and optimisation flags."""
    data = parser.add_argument_group("data and model")
    source = data.add_mutually_exclusive_group()
    source.add_argument(
        "--dataset",
        help="what tfds.builder takes: NAME, NAME/CONFIG, NAME:VERSION, or a prepared dataset "
        "folder (default: digits, built offline; mnist and others download)",
    )
    source.add_argument(
        "--data",
        metavar="PATH_OR_GLOB",
        help="train on files instead: .csv (with --label), .npz (arrays x and y, or named) or "
        ".tfrecord (with --feature-spec)",
    )
    data.add_argument(
        "--dataset-module",
        metavar="FILE_OR_MODULE",
        help="a .py file or module that registers your TFDS builder, imported before --dataset",
    )
    data.add_argument(
        "--label",
        help="the label's column (CSV), array (npz) or feature (tfrecord, TFDS); for TFDS the "
        "other features become the inputs (default: the dataset's supervised keys; y for npz)",
    )
    data.add_argument(
        "--feature-spec",
        metavar="JSON_OR_FILE",
        help='features of .tfrecord files: {"NAME": {"shape": [...], "dtype": "float32|int64|'
        'string|image|uint8"}}, the label\'s entry with "num_classes" for classification',
    )
    data.add_argument(
        "--test-fraction",
        type=fraction,
        default=0.2,
        help="share held out as the test split when the data has none (files, TFDS datasets "
        "with only train): every (1/F)-th example (default: 0.2)",
    )
    data.add_argument("--data-dir", help="TFDS data directory (default: ~/tensorflow_datasets)")
    data.add_argument(
        "--num-shards",
        type=positive_int,
        default=8,
        help="TFRecord files per split; raised to the worker count if lower (default: 8)",
    )
    which = data.add_mutually_exclusive_group()
    which.add_argument(
        "--model", default="mlp", help=f"model: {', '.join(models.MODELS)} (default: mlp)"
    )
    which.add_argument(
        "--model-module",
        metavar="PATH_OR_MODULE",
        help="your model: a .py file or an importable module defining build_model(spec), "
        "optionally compile_settings(spec), preprocess(features, label) and TASK "
        "(docs/your-model.md)",
    )
    data.add_argument("--epochs", type=positive_int, default=5, help="epochs (default: 5)")
    batch = data.add_mutually_exclusive_group()
    batch.add_argument(
        "--batch-size",
        type=positive_int,
        default=DEFAULT_BATCH_SIZE,
        help="examples per replica per step (per GPU); global batch = this x replicas "
        f"(default: {DEFAULT_BATCH_SIZE})",
    )
    batch.add_argument(
        "--global-batch-size",
        type=positive_int,
        help="global batch instead; must divide across the replicas",
    )
    data.add_argument(
        "--learning-rate",
        type=positive_float,
        help="learning rate at batch 32, scaled linearly with the batch; given, it replaces "
        "the rate of a model module's own optimizer (default: 0.001, or the module's)",
    )
    data.add_argument(
        "--no-scale-learning-rate",
        dest="scale_learning_rate",
        action="store_false",
        help="train at the learning rate as given, at any batch (default: scaled linearly "
        "from batch 32 to the batch of one update)",
    )
    data.add_argument(
        "--warmup-epochs",
        type=non_negative_int,
        default=1,
        help="epochs of linear learning-rate warm-up (default: 1)",
    )
    data.add_argument(
        "--validation-fraction",
        type=fraction_or_zero,
        default=0.0,
        help="share of the training split held out and evaluated after each epoch, its "
        "val_ metrics in the record (default: 0, none)",
    )
    data.add_argument(
        "--seed", type=seed, default=42, help=f"random seed, 0 to {MAX_SEED} (default: 42)"
    )
    speed = parser.add_argument_group("speed")
    speed.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="float32",
        help="Keras mixed-precision policy; logits stay float32, mixed_float16 gets loss "
        "scaling and needs GPUs (rehearse with mixed_bfloat16 on CPU) (default: float32)",
    )
    speed.add_argument("--jit-compile", action="store_true", help="compile the train step with XLA")
    speed.add_argument(
        "--steps-per-execution",
        type=bounded_int(1, MAX_STEPS_PER_EXECUTION),
        default=1,
        help=f"training steps per tf.function call, 1 to {MAX_STEPS_PER_EXECUTION:,} (default: 1)",
    )
    speed.add_argument(
        "--profile-steps",
        default="",
        metavar="A,B",
        help="take a TensorFlow profiler trace of steps A to B of the first epoch into the "
        "TensorBoard logs, 1 <= A <= B <= the epoch's steps (e.g. 10,20; default: none)",
    )
    data.add_argument(
        "--checkpoint-every",
        default="epoch",
        metavar="STEPS|DURATION",
        help="write the checkpoint a restarted or preempted run resumes from every STEPS "
        "training steps (and at each epoch's end), or every DURATION of training (90s, 10m, "
        "2h: turned into steps from the measured step time); a restart then trains again at "
        "most that much (default: epoch, at each epoch's end)",
    )


def add_cluster_arguments(parser: argparse.ArgumentParser, gpus_elsewhere: str) -> None:
    """Cluster-shape flags.

    Args:
        parser: the subcommand's parser.
        gpus_elsewhere: what else `--gpus-per-machine` sets in this subcommand
            (a sentence of its help), besides the local cluster.
    """
    cluster = parser.add_argument_group("cluster shape")
    cluster.add_argument(
        "--workers",
        type=int,
        default=None,
        help="processes that compute gradients (multi_worker_mirrored: all of them; "
        "parameter_server: besides the chief) (default: 2 for multi-worker strategies, else 1)",
    )
    cluster.add_argument(
        "--ps",
        type=int,
        default=None,
        help="parameter servers (parameter_server only; default: 1 there, else 0)",
    )
    add_gpus_per_machine_argument(
        cluster,
        older="--devices",
        parse=int,  # 0 and below: refused by the strategy spec, naming the flag
        help="GPUs on each machine that computes gradients; on a machine without GPUs, the "
        f"logical CPU devices standing in for them locally. {gpus_elsewhere} "
        f"(default: 2 under mirrored, else 1)",
    )
    cluster.add_argument(
        "--evaluator",
        action="store_true",
        help="add an evaluator task that evaluates each epoch's checkpoint on the test split "
        "beside the training (Vertex AI pool 3, TFJob Evaluator; locally one more process)",
    )
    cluster.add_argument(
        "--all-reduce",
        choices=ALL_REDUCE,
        default="auto",
        help="gradient all-reduce: multi_worker_mirrored takes nccl or ring (auto: nccl with "
        "GPUs, ring without); mirrored takes nccl, hierarchical_copy or "
        "reduction_to_one_device (auto: TensorFlow's collective all-reduce) (default: auto)",
    )
    cluster.add_argument(
        "--all-reduce-pack-mb",
        type=non_negative_float,
        default=0.0,
        help="multi_worker_mirrored only: all-reduce the gradients in packs of about this "
        "many MB, each as soon as its gradients exist, so communication overlaps "
        "back-propagation (0: TensorFlow's one pack after the last gradient) (default: 0)",
    )
    cluster.add_argument(
        "--oversubscribe",
        action="store_true",
        help="run a local cluster larger than this machine's cores and memory hold "
        "instead of refusing it (the refusal gives the numbers)",
    )
    cluster.add_argument(
        "--allow-network-exposure",
        action="store_true",
        help="where this machine cannot give a local cluster a loopback-only network "
        "namespace, run it anyway with TensorFlow's servers listening on every interface "
        "(unauthenticated, reachable from the network)",
    )


def build_run_config(args: argparse.Namespace, strategy: str, output_dir: str) -> RunConfig:
    """A validated RunConfig from the shared flags.

    Raises:
        ConfigError: for any value the run cannot use.
    """
    model = model_config(args)
    spec = spec_for(strategy)
    cluster = ClusterConfig(
        strategy=strategy,
        workers=spec.default_workers() if args.workers is None else args.workers,
        ps=spec.default_ps() if args.ps is None else args.ps,
        gpus_per_machine=(
            spec.default_devices if args.gpus_per_machine is None else args.gpus_per_machine
        ),
        evaluator=args.evaluator,
        all_reduce=args.all_reduce,
        all_reduce_pack_mb=args.all_reduce_pack_mb,
    )
    per_replica = args.batch_size
    if args.global_batch_size is not None:
        from components.core.config import validate_cluster

        validate_cluster(cluster)
        per_replica = per_replica_from_global(args.global_batch_size, cluster)
    _refuse_empty(args)
    if args.data_dir is not None and not os.path.isdir(args.data_dir):
        raise ConfigError(
            f"--data-dir {args.data_dir} does not exist: create it or pass another folder"
        )
    config = RunConfig(
        data=DataConfig(
            dataset=_dataset_name(args),
            dataset_module=args.dataset_module,
            files=args.data,
            label=args.label,
            feature_spec=args.feature_spec,
            test_fraction=args.test_fraction,
            data_dir=args.data_dir,
            num_shards=max(args.num_shards, spec.input_pipelines(cluster)),
        ),
        model=model,
        training=TrainingConfig(
            epochs=args.epochs,
            per_replica_batch_size=per_replica,
            base_learning_rate=args.learning_rate or TrainingConfig.base_learning_rate,
            learning_rate_given=args.learning_rate is not None,
            scale_learning_rate=args.scale_learning_rate,
            warmup_epochs=args.warmup_epochs,
            validation_fraction=args.validation_fraction,
            seed=args.seed,
            steps_per_execution=args.steps_per_execution,
            precision=args.precision,
            jit_compile=args.jit_compile,
            profile_steps=args.profile_steps,
            checkpoint_every=args.checkpoint_every,
        ),
        cluster=cluster,
        output_dir=storage.absolute(output_dir),
    )
    validate_run(config)
    return config


def check_machine_size(args: argparse.Namespace, config: RunConfig) -> None:
    """Refuses a local cluster this machine cannot hold, unless `--oversubscribe`."""
    from components.core.launch.preflight import check_machine_size as check

    if not args.oversubscribe:
        check(config)


def apply_network_exposure(args: argparse.Namespace) -> None:
    """Passes `--allow-network-exposure` to every local launcher below this command.

    An environment variable, since kfp.local runs the train step's launcher in
    its own process; it is a property of this machine, not of the run, so it
    stays out of the RunConfig (the cloud never needs it).
    """
    from components.core.launch import netns

    if args.allow_network_exposure:
        os.environ[netns.ALLOW_EXPOSURE_ENV] = "1"


# Flags naming a thing: given empty (`--dataset ""`, an unset shell variable), each
# would silently fall back to a default instead of what the user meant.
_NAMING_FLAGS = (
    "dataset", "data", "dataset_module", "label", "feature_spec", "data_dir", "model_module",
    "shards_dir",
)  # fmt: skip


def _refuse_empty(args: argparse.Namespace) -> None:
    """Refuses a naming flag given as an empty string.

    Raises:
        ConfigError: naming the flag.
    """
    for name in _NAMING_FLAGS:
        if getattr(args, name, None) == "":
            flag = "--" + name.replace("_", "-")
            raise ConfigError(f"{flag} is empty: pass a value, or leave the flag out")


def _dataset_name(args: argparse.Namespace) -> str:
    """`--dataset`, or the files' name (what reports call `--data` files)."""
    from components.core.data_sources import files_name

    if args.data:
        return files_name(args.data)
    return args.dataset or DataConfig.dataset


def check_data(config: RunConfig):
    """Checks the run's data, and that the model can take it, before anything starts.

    Returns:
        The examples' `InputSpec`.

    Raises:
        ConfigError: bad data (`datasets.describe`), several or non-numeric
            features for a built-in model, which takes one numeric input, or a
            dataset that cannot be obtained here (`datasets.check_available`).
    """
    from components.core import datasets
    from components.core.data_sources import listing

    if config.data.dataset_module:  # first in a child process: its import may end one
        from components.core import user_code

        user_code.check("dataset", config.data.dataset_module)
    # Built once for both checks: building it can import TensorFlow and read metadata.
    builder = datasets.tfds_builder_of(config.data)
    spec = datasets.describe(config.data, builder)
    if not config.model.module and config.model.name in models.MODELS:
        single = spec.single_feature
        if single is None or single.dtype == "string":
            kinds = listing(f"{n} ({f.dtype})" for n, f in spec.features.items())
            raise ConfigError(
                f"--model {config.model.name} takes one numeric input, the data has {kinds}: "
                "keep numeric columns only (a CSV's numeric columns form one vector), or give "
                "a model with named inputs"
            )
    datasets.check_available(config.data, builder)
    return spec


def model_config(args: argparse.Namespace) -> ModelConfig:
    """The model flags as a ModelConfig; a module is imported once here to refuse a bad one.

    A module file is named by its absolute path (every local task opens it; a
    cloud job gets a staged copy).

    Raises:
        ConfigError: an unknown model, or a module that cannot be imported
            (naming its file and line).
    """
    module_source = getattr(args, "model_module", None)
    if not module_source:
        models.check_model_name(args.model)
        return ModelConfig(args.model)
    from components.core import model_module

    if model_module.is_file_source(module_source) and "://" not in module_source:
        module_source = os.path.abspath(module_source)
    from components.core import user_code

    name = user_code.check("model", module_source)["name"]  # imported in a child process
    return ModelConfig(name=name, module=module_source)


def default_output_dir(kind: str) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return os.path.join("runs", f"{stamp}-{kind}")
