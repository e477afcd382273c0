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
C thread, dumps the stacks and ends the worker a little later; halfway to it, a process beside the worker prints
the worker's native stacks (tests/native_stacks.py), which tell what holds the lock.

Two things then keep one hung test from costing the whole run (as it did in a CI run that went on until CI's own limit
cut it off): pytest-xdist's ``--dist loadgroup`` hands a crashed worker's unfinished group to the worker that replaces
it, the crashed test included, so a test that hangs every time would hang each replacement in turn (up to xdist's 24
restarts, 7 minutes each); and ``--session-timeout`` (pytest-timeout) counts from each worker's own start, so a
replacement would start a fresh hour. Here each worker writes the test it is running to a file of its own in a
directory the controller made (``workerinput``); a test found in another worker's file ended that worker already (its
worker wrote it there and never took it out) and fails without running again. And the controller hands its workers
one deadline, the run's start plus ``--session-timeout``: past it, no worker, new or old, starts another test.
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.native_stacks import StackWatcher

DEFAULT_TIMEOUT_S = 120.0  # pyproject.toml's [tool.pytest.ini_options] timeout, when the ini gives none
# (the two below are set in the environment by tests/test_watchdog.py alone, to hang a worker in seconds)
# past the test's timeout: pytest-timeout's own failure and the test's teardown come first
MARGIN_S = float(os.environ.get("KQP_WATCHDOG_MARGIN_S", 90))
BACKSTOP_S = float(os.environ.get("KQP_WATCHDOG_BACKSTOP_S", 30))  # past that, the C thread's turn

_stderr_fd: int | None = None
_running: Path | None = None  # this worker's file: the test it is running (empty between tests)
_deadline = 0.0  # time.time() past which no test starts (0: none)
_stacks: StackWatcher | None = None  # in a worker of a parallel run
_DEADLINE = pytest.StashKey[float]()
_RUNNING = pytest.StashKey[str]()  # the controller's directory of its workers' files, made for its first worker


def pytest_configure(config: pytest.Config) -> None:
    """Keep a descriptor of the worker's real standard error (capture is off while plugins are configured); in the
    controller, note the run's deadline (the directory of the workers' files is made for its first worker, in
    :func:`pytest_configure_node`); in a worker, take both from the controller and start its stack watcher."""
    global _stderr_fd, _running, _deadline, _stacks
    if _stderr_fd is None:
        _stderr_fd = os.dup(2)
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        config.stash[_DEADLINE] = session_deadline(config)
    elif "kqp_running" in workerinput:
        _running = Path(workerinput["kqp_running"]) / str(os.getpid())
        _deadline = workerinput["kqp_deadline"]
        _stacks = StackWatcher(_stderr_fd)


def session_deadline(config: pytest.Config) -> float:
    """The run's start plus its ``--session-timeout`` (pytest-timeout's option or ini), as time.time(); 0: none."""
    seconds = config.getoption("session_timeout", None) or config.getini("session_timeout") or 0
    return time.time() + float(seconds) if float(seconds) > 0 else 0.0


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """pytest-xdist's controller, for each worker it starts (replacements too): the directory and the deadline."""
    config = node.config
    if _RUNNING not in config.stash:
        config.stash[_RUNNING] = tempfile.mkdtemp(prefix="kqp-running-")
    node.workerinput["kqp_running"] = config.stash[_RUNNING]
    node.workerinput["kqp_deadline"] = config.stash.get(_DEADLINE, 0.0)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _RUNNING in config.stash:
        shutil.rmtree(config.stash[_RUNNING], ignore_errors=True)


def ended_a_worker(nodeid: str) -> str | None:
    """The file of a worker that was running ``nodeid`` and never finished it (xdist runs a test on one worker at a
    time: a file other than this worker's naming it was left by a worker that ended), or None."""
    if _running is None:
        return None
    for other in _running.parent.iterdir():
        if other != _running and other.read_text() == nodeid:
            return other.name
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    pid = ended_a_worker(item.nodeid)
    if pid is not None:
        pytest.fail(f"not run again: this test ended its worker (pid {pid}) already; its stacks are above", False)


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
    from tests.harness import _LIVE  # here: a run of tests that start no broker does not import the proxy

    for proc in list(_LIVE):
        try:
            proc.kill()
        except OSError:
            pass
    os.write(fd, b"+++ watchdog: the worker ends here\n")
    os._exit(70)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item):
    if _running is not None:
        _running.write_text(item.nodeid)
    try:
        return (yield from _watched(item))
    finally:
        if _running is not None:
            _running.write_text("")
        if _deadline and time.time() > _deadline:
            item.session.shouldfail = "session-timeout: the run's --session-timeout since its start is exceeded"


def _watched(item: pytest.Item):
    limit = limit_of(item)
    if not limit or _stderr_fd is None:
        return (yield)
    timer = threading.Timer(limit, _expire, (item.nodeid, limit))
    timer.daemon = True
    timer.start()
    faulthandler.dump_traceback_later(limit + BACKSTOP_S, exit=True, file=_stderr_fd)
    if _stacks is not None:
        _stacks.arm(limit + BACKSTOP_S / 2, item.nodeid)
    try:
        return (yield)
    finally:
        if _stacks is not None:
            _stacks.disarm()
        faulthandler.cancel_dump_traceback_later()
        timer.cancel()
