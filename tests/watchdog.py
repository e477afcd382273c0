"""A hung test ends its worker, loudly, instead of the whole run.

pytest-timeout (``timeout`` in pyproject.toml, ``pytest.mark.timeout`` per test) fails a test that runs too long by
raising in its main thread from a signal handler: a thread blocked inside a C call that never returns to Python
(a client library's close, a destructor waiting on its own threads) is never interrupted, and the worker, its test
and every test left in its xdist group would wait until CI gives up on the whole run, printing nothing about why.

So every test also arms a watchdog a margin past its timeout. If the test is still running then, a thread of the
watchdog's writes which test it is and the stacks of all the worker's threads to the worker's own standard error
(the descriptor saved before pytest captured it, as pytest's ``faulthandler_timeout`` does), kills the brokers the
worker started (their ports and cores are not left to the worker that replaces it) and ends the worker;
pytest-xdist reports the test as crashed by name and hands the rest of the worker's tests to a new worker. Should
that thread not get to run (a C call holding the interpreter's lock), :func:`faulthandler.dump_traceback_later`, a
C thread, dumps the stacks and ends the worker a little later.
"""

from __future__ import annotations

import faulthandler
import os
import threading

import pytest

from tests.harness import _LIVE

DEFAULT_TIMEOUT_S = 120.0  # pyproject.toml's [tool.pytest.ini_options] timeout, when the ini gives none
MARGIN_S = 90.0  # past the test's timeout: pytest-timeout's own failure and the test's teardown come first
BACKSTOP_S = 30.0  # past that, the C thread's turn

_stderr_fd: int | None = None


def pytest_configure(config: pytest.Config) -> None:
    """Keep a descriptor of the worker's real standard error (capture is off while plugins are configured)."""
    global _stderr_fd
    if _stderr_fd is None:
        _stderr_fd = os.dup(2)


def timeout_of(item: pytest.Item) -> float:
    """``item``'s pytest-timeout in seconds: its closest ``timeout`` mark's, else the ini's (0: none)."""
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    return float(item.config.getini("timeout") or DEFAULT_TIMEOUT_S)


def limit_of(item: pytest.Item) -> float:
    """The seconds after which ``item`` is taken as hung: its pytest-timeout plus the margin (0: no timeout)."""
    timeout = timeout_of(item)
    return timeout + MARGIN_S if timeout > 0 else 0.0


def _expire(nodeid: str, limit: float) -> None:
    fd = _stderr_fd
    assert fd is not None
    os.write(fd, f"\n+++ watchdog: {nodeid} still running {limit:.0f} s after it started; the stacks:\n".encode())
    faulthandler.dump_traceback(file=fd, all_threads=True)
    for proc in list(_LIVE):
        try:
            proc.kill()
        except OSError:
            pass
    os.write(fd, b"+++ watchdog: the worker ends here\n")
    os._exit(70)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item):
    limit = limit_of(item)
    if not limit or _stderr_fd is None:
        return (yield)
    timer = threading.Timer(limit, _expire, (item.nodeid, limit))
    timer.daemon = True
    timer.start()
    faulthandler.dump_traceback_later(limit + BACKSTOP_S, exit=True, file=_stderr_fd)
    try:
        return (yield)
    finally:
        faulthandler.cancel_dump_traceback_later()
        timer.cancel()
