"""The `strategist` command line.

Each subcommand lives in its own module of this package and exposes
`add_parser(subparsers)` and `run(args) -> int`. Heavy imports (TensorFlow,
KFP, cloud SDKs) happen inside `run`, so `--help` answers at once. Bad input
exits 2 with a one-line message before anything is launched.
"""

from __future__ import annotations

import argparse
import errno
import functools
import importlib
import logging
import os
import signal
import sys

from components.core.config import ConfigError
from components.core.errors import printable
from components.core.signals import exit_code, signal_name
from pipelines.cli.quiet_tensorflow import tensorflow_imported_quietly

# Order is the order `strategist --help` lists them in.
SUBCOMMANDS = (
    "train",
    "status",
    "select",
    "compare",
    "compile",
    "submit",
    "schedule",
    "gate",
)


class OneLineErrorParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (no usage block), exit 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {printable(message)} (see {self.prog} --help)\n")


class ExamplesFormatter(argparse.HelpFormatter):
    """Wraps a description as argparse does, and keeps an `examples:` epilog line by line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="strategist",
        description=(
            "Shard a TFDS dataset, pick a tf.distribute strategy, train, evaluate and compare "
            "strategies: locally on a localhost cluster, on Vertex AI, or on Kubeflow. "
            "`strategist COMMAND --help` shows a command's flags and examples."
        ),
        formatter_class=ExamplesFormatter,
        epilog=(
            "examples:\n"
            "  strategist compare\n"
            "  strategist train --strategy multi_worker_mirrored --workers 2 --epochs 3\n"
            "  strategist select --machines 2 --gpus-per-machine 4 --gpu a100 --model resnet50\n"
            "  strategist compare --max-steps 200 --output runs/pilot\n"
            "  strategist status runs/pilot"
        ),
    )
    # No abbreviations: `--gpus` must not silently mean `--gpus-per-machine`.
    subparsers = parser.add_subparsers(
        dest="command",
        metavar="COMMAND",
        required=True,
        parser_class=functools.partial(
            OneLineErrorParser, allow_abbrev=False, formatter_class=ExamplesFormatter
        ),
    )
    for name in SUBCOMMANDS:
        importlib.import_module(f"pipelines.cli.{name}").add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs a subcommand; a reader that stops reading (`| head -1`) ends it quietly.

    Python ignores SIGPIPE, so a write to a closed pipe raises BrokenPipeError;
    as a Unix tool killed by SIGPIPE would, the command stops without a word,
    with 128 + SIGPIPE (141). Stdout then points at /dev/null so the flush at
    exit does not raise again. See
    https://docs.python.org/3/library/signal.html#note-on-sigpipe
    """
    try:
        try:
            return _run(argv)
        finally:
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


def _run(argv: list[str] | None) -> int:
    # TensorFlow's C++ INFO/WARNING lines (no CUDA here, CPU features) drown the CLI's output;
    # set before any subcommand imports TensorFlow. An explicit setting wins.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # One Keras in every process the command starts, as in the trainer's: tf-keras. Without
    # it, `import tensorflow` also loads Keras 3 (and scikit-learn): 2-4 s a process.
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        # Whatever imports TensorFlow in the CLI's own process (a user's module, a TFDS
        # builder describing its dataset) leaves TensorFlow's start-up lines off the console.
        with tensorflow_imported_quietly():
            return int(args.run(args) or 0)
    except ConfigError as err:
        print(f"strategist {args.command}: error: {printable(str(err))}", file=sys.stderr)
        return 2
    except OSError as err:
        if err.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        where = f" writing {printable(str(err.filename))}" if err.filename else ""
        print(
            f"strategist {args.command}: error: no space left on the device{where}: free some, "
            "then run the same command again",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM under `sigterm_raises`
        print(f"strategist {args.command}: interrupted ({signal_name(interrupt)})", file=sys.stderr)
        return exit_code(interrupt)


def run() -> None:
    """The `strategist` command: `main()`, then an exit that skips the interpreter's teardown.

    With TensorFlow loaded, the teardown spends 1-3 s collecting TensorFlow's objects after
    the command's work is done and written; the trainer's tasks exit the same way.
    """
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


if __name__ == "__main__":
    run()
