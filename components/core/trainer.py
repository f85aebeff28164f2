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
import signal
import sys
import time

from components.core import datasets, divergence, reduction_server, storage, strategies, training
from components.core.config import ConfigError, RunConfig, validate_run
from components.core.strategy_spec import EVALUATOR

# Set by the local launcher when it restarts a cluster, so metrics count restarts.
RESTARTS_ENV = "STRATEGIST_RESTARTS"
# Set by the local launcher to its own PID: its tasks die with it (see die_with_launcher).
LAUNCHER_PID_ENV = "STRATEGIST_LAUNCHER_PID"
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
# Exit code of a task that found its input unusable: launchers do not restart it,
# since a restart would fail the same way.
CONFIG_ERROR_EXIT = 2
# How the line a task prints once TensorFlow is imported begins.
TENSORFLOW_UP = "imported tensorflow"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m components.core.trainer",
        description="Run one task of a Strategist training cluster (role from TF_CONFIG).",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", help="path of a RunConfig JSON file")
    source.add_argument("--config-json", help="the RunConfig as a JSON string")
    return parser.parse_args(argv)


def die_with_launcher() -> None:
    """Asks Linux to SIGKILL this task when the local launcher that started it dies.

    A parameter-server worker or PS otherwise serves forever in `server.join()`
    after its launcher was SIGKILLed. The parent-death signal is set here, in
    the child, rather than in a `preexec_fn` (unsafe in a launcher that runs
    reader threads); a launcher that died before this line is caught by the
    parent-PID check. Cloud tasks (no `LAUNCHER_PID_ENV`) are left alone.
    """
    launcher = os.environ.get(LAUNCHER_PID_ENV)
    if not launcher or not sys.platform.startswith("linux"):
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != int(launcher):
        os._exit(128 + signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    """Runs this process's task; returns its exit code (`CONFIG_ERROR_EXIT` on bad input)."""
    die_with_launcher()
    args = parse_args(argv)
    try:
        if args.config:
            config = RunConfig.from_json(storage.read_text(args.config))
        else:
            config = RunConfig.from_json(args.config_json)
        validate_run(config)
        reduction_server.check_this_process()
        role = strategies.Role.from_tf_config(os.environ.get("TF_CONFIG"))
        if not strategies.is_server_role(config.cluster, role):
            # Missing or damaged shards: say so in a second, before TensorFlow loads.
            datasets.load_manifest(config.data.shards_dir or "")
    except (ConfigError, OSError, ValueError) as err:
        print(f"trainer: error: {err}", file=sys.stderr)
        return CONFIG_ERROR_EXIT
    started = time.monotonic()
    import tensorflow as tf

    # The launcher's stall clock starts at this line (`launch.liveness`): importing
    # TensorFlow takes seconds to minutes on a loaded machine, and is no stall.
    print(f"{TENSORFLOW_UP} {tf.__version__} in {time.monotonic() - started:.1f} s", flush=True)
    tf.get_logger().setLevel("ERROR")  # retracing chatter from checkpoint saves
    if strategies.is_server_role(config.cluster, role):
        strategies.run_server(role)
        return 0
    try:
        if role.task_type == EVALUATOR:
            training.evaluate_beside(config)
        else:
            training.train(config, role, restarts=int(os.environ.get(RESTARTS_ENV, "0")))
    except ConfigError as err:  # e.g. shards that cannot feed this cluster, a bad model module
        print(f"trainer: error: {err}", file=sys.stderr, flush=True)
        return CONFIG_ERROR_EXIT
    except divergence.Diverged as err:
        print(f"trainer: error: {err}", file=sys.stderr, flush=True)
        return divergence.DIVERGED_EXIT
    return 0


if __name__ == "__main__":
    exit_code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Everything is written (atomically) by now. A normal interpreter exit would
    # destroy the input iterators training.keep_input_iterators kept alive, and
    # with them wait out tf.data autotuning threads for up to 10 s each.
    os._exit(exit_code)
