"""One way to handle Ctrl-C and SIGTERM: `Interrupted`, its exit code, and the handlers."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from components.core import signals


def test_exit_code_is_128_plus_the_signal():
    assert signals.exit_code(KeyboardInterrupt()) == 130  # Ctrl-C carries no signum
    assert signals.exit_code(signals.Interrupted()) == 143
    assert signals.exit_code(signals.Interrupted(signal.SIGINT)) == 130
    assert signals.signal_name(KeyboardInterrupt()) == "SIGINT"
    assert signals.signal_name(signals.Interrupted(signal.SIGTERM)) == "SIGTERM"


def test_interrupted_is_a_keyboard_interrupt_with_its_signal():
    interrupt = signals.Interrupted(signal.SIGTERM)
    assert isinstance(interrupt, KeyboardInterrupt)
    assert interrupt.signum == signal.SIGTERM


def test_sigterm_raises_interrupted_and_restores_the_handler():
    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(signals.Interrupted) as caught, signals.sigterm_raises():
        os.kill(os.getpid(), signal.SIGTERM)
    assert caught.value.signum == signal.SIGTERM
    assert signals.exit_code(caught.value) == 143
    assert signal.getsignal(signal.SIGTERM) is previous


def test_signals_ignored_ignores_both_and_restores_them():
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with signals.signals_ignored():
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGTERM)  # ignored: the test goes on
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_outside_the_main_thread_nothing_is_installed():
    seen = []

    def body():
        with signals.sigterm_raises(), signals.signals_ignored():
            seen.append(signal.getsignal(signal.SIGTERM))

    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [before]


@pytest.mark.parametrize(
    ("sig", "raised"), [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, signals.Interrupted)]
)
def test_signals_deferred_acts_on_a_signal_only_after_the_block(sig, raised):
    """A signal inside the block reaches its handler as the block ends, not before."""
    reached_the_end = []
    with pytest.raises(raised), signals.sigterm_raises(), signals.signals_deferred():
        os.kill(os.getpid(), sig)
        reached_the_end.append(True)  # a handler that ran here would have raised
    assert reached_the_end == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_signals_deferred_without_a_signal_changes_nothing():
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with signals.signals_deferred():
        pass
    assert {sig: signal.getsignal(sig) for sig in before} == before
