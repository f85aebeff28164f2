"""The trainer entry point every training process runs, on every backend.

    python -m components.core.trainer --config-json '<RunConfig JSON>'

The process learns its role from `TF_CONFIG` (set by Vertex AI, the Kubeflow
training operator, or Strategist's local launcher): parameter-server workers
and parameter servers serve; the chief (or the only process) trains, exports
the model and writes `metrics.json`.
"""

from __future__ import annotations

import argparse
import os
import sys

from components.core import datasets, strategies, training
from components.core.config import ConfigError, RunConfig, validate_run
from components.core.strategy_spec import EVALUATOR

# Set by the local launcher when it restarts a cluster, so metrics count restarts.
RESTARTS_ENV = "STRATEGIST_RESTARTS"
# Exit code of a task that found its input unusable: launchers do not restart it,
# since a restart would fail the same way.
CONFIG_ERROR_EXIT = 2


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m components.core.trainer",
        description="Run one task of a Strategist training cluster (role from TF_CONFIG).",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", help="path of a RunConfig JSON file")
    source.add_argument("--config-json", help="the RunConfig as a JSON string")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Runs this process's task; returns its exit code (`CONFIG_ERROR_EXIT` on bad input)."""
    args = parse_args(argv)
    try:
        if args.config:
            with open(args.config) as handle:
                config = RunConfig.from_json(handle.read())
        else:
            config = RunConfig.from_json(args.config_json)
        validate_run(config)
        role = strategies.Role.from_tf_config(os.environ.get("TF_CONFIG"))
        if not strategies.is_server_role(config.cluster, role):
            # Missing or damaged shards: say so in a second, before TensorFlow loads.
            datasets.load_manifest(config.data.shards_dir or "")
    except (ConfigError, OSError, ValueError) as err:
        print(f"trainer: error: {err}", file=sys.stderr)
        return CONFIG_ERROR_EXIT
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")  # retracing chatter from checkpoint saves
    if strategies.is_server_role(config.cluster, role):
        strategies.run_server(role)
        return 0
    if role.task_type == EVALUATOR:
        training.evaluate_beside(config)
        return 0
    try:
        training.train(config, role, restarts=int(os.environ.get(RESTARTS_ENV, "0")))
    except ConfigError as err:  # e.g. shards that cannot feed this cluster
        print(f"trainer: error: {err}", file=sys.stderr, flush=True)
        return CONFIG_ERROR_EXIT
    return 0


if __name__ == "__main__":
    exit_code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Everything is written (atomically) by now. A normal interpreter exit would
    # destroy the input iterators training.keep_input_iterators kept alive, and
    # with them wait out tf.data autotuning threads for up to 10 s each.
    os._exit(exit_code)
