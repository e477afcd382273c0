"""The demo's signal handler: an Interrupted it raises that lands where Python swallows it is raised again."""

import os
import signal
import sys
import time
import weakref

import pytest

from demo.run import RESEND_S, Interrupted, Stop


class Thing:
    pass


def test_an_interrupted_swallowed_by_a_weakref_callback_comes_again():
    stop = Stop()
    stop.raising = True
    swallowed = []
    previous_hook, previous_handler = sys.unraisablehook, signal.signal(signal.SIGUSR1, stop)
    sys.unraisablehook = lambda unraisable: swallowed.append(unraisable.exc_type)

    def collected(_):  # what a garbage collection inside a client library runs: its exceptions are "ignored"
        os.kill(os.getpid(), signal.SIGUSR1)
        for _ in range(10_000):  # the handler runs here, inside the callback
            pass

    try:
        thing = Thing()
        ref = weakref.ref(thing, collected)
        del thing
        assert ref() is None and swallowed == [Interrupted]  # the first raise was lost where it landed
        with pytest.raises(Interrupted) as raised:
            time.sleep(RESEND_S * 3)  # deliberate: interrupted by the signal, re-sent every RESEND_S
        stop.delivered = True
        assert raised.value.signal_name == "SIGUSR1"
        time.sleep(RESEND_S * 1.5)  # delivered: nothing is sent again
    finally:
        stop.delivered = True
        signal.signal(signal.SIGUSR1, previous_handler)
        sys.unraisablehook = previous_hook


def test_once_delivered_further_signals_change_nothing():
    stop = Stop()
    stop.raising = True
    with pytest.raises(Interrupted):
        stop(signal.SIGINT)
    stop.delivered = True
    stop(signal.SIGINT)  # the clean-up runs to its end
    stop(signal.SIGTERM)
    assert stop.signal_name == "SIGINT"
