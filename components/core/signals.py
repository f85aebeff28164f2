"""Ctrl-C and SIGTERM, handled one way everywhere.

SIGTERM (a cancelled pipeline run, `kill`, a container stop) unwinds like Ctrl-C:
`sigterm_raises` turns it into `Interrupted`, a `KeyboardInterrupt` that carries
the signal, so `finally` blocks run, staged folders are removed, started processes
are stopped and cloud jobs are cancelled. A command then exits `exit_code(...)`:
128 + the signal number, as a shell reports a process a signal ended (SIGINT 130,
SIGTERM 143). Handlers can only be set in the main thread: elsewhere these helpers
do nothing.

`signals_deferred` holds Ctrl-C and SIGTERM back while a process is started and
recorded, so no signal can land between the fork and the bookkeeping that lets
the handler stop the new process.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class Interrupted(KeyboardInterrupt):
    """A signal (SIGTERM, or SIGINT where it was caught) interrupted the command.

    Attributes:
        signum: the signal received; a command exits `128 + signum`.
    """

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__(f"received signal {signum}")
        self.signum = signum


def signal_of(interrupt: BaseException) -> int:
    """The signal behind a KeyboardInterrupt: its `signum`, else SIGINT (Ctrl-C)."""
    return getattr(interrupt, "signum", signal.SIGINT)


def exit_code(interrupt: BaseException) -> int:
    """The exit code of a command ended by `interrupt`: 128 + signal (130, 143)."""
    return 128 + signal_of(interrupt)


def signal_name(interrupt: BaseException) -> str:
    """`SIGINT` or `SIGTERM`: the signal behind `interrupt`, for messages."""
    return signal.Signals(signal_of(interrupt)).name


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """Turns SIGTERM into `Interrupted` (a KeyboardInterrupt) inside the block.

    The previous handler is restored on leaving. Main thread only (Python runs
    signal handlers there); elsewhere this does nothing.
    """
    if not _in_main_thread():
        yield
        return

    def handler(signum, frame):
        raise Interrupted(signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def signals_ignored() -> Iterator[None]:
    """Ignores Ctrl-C and SIGTERM inside the block (main thread only).

    For work a second signal must not cut short, such as stopping processes.
    """
    if not _in_main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Holds Ctrl-C and SIGTERM until the block ends, then acts on them (main thread only).

    For a fork and its bookkeeping (`subprocess.Popen` and recording the new
    process): a `KeyboardInterrupt` raised inside `Popen`, after the fork, or
    before the caller stored the `Popen`, leaves a child nobody stops. Python
    runs handlers between bytecodes of the main thread only, so a handler that
    merely notes the signal makes the block atomic for them; on leaving, the
    previous handlers are restored and each noted signal is handed to its
    handler (which may raise). Only Python-level handlers change: the signal
    mask a child inherits is untouched.
    """
    if not _in_main_thread():
        yield
        return
    received: list[int] = []
    handled = (signal.SIGINT, signal.SIGTERM)
    previous = {
        sig: signal.signal(sig, lambda signum, frame: received.append(signum)) for sig in handled
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for signum in dict.fromkeys(received):  # each signal once, in arrival order
            handler = previous[signum]
            if callable(handler):
                handler(signum, None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(signum)
