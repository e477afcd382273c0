"""The suite's watchdog (tests/watchdog.py) in a parallel run of its own: a test that ends its worker is not run again
by the worker that replaces it, and past the run's ``--session-timeout`` a replacement worker starts no test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

GROUP = """
import os
import time

import pytest


@pytest.mark.xdist_group("one")
def test_ends_its_worker():
    with open(os.environ["RUNS"], "a") as runs:
        runs.write("ran\\n")
    time.sleep(float(os.environ["BEFORE_S"]))
    os._exit(3)  # as the watchdog ends a worker whose test hung


@pytest.mark.xdist_group("one")
def test_after_it():
    with open(os.environ["RUNS"], "a") as runs:
        runs.write("after\\n")
"""


HOLDS_THE_LOCK = """
import ctypes
import os

import pytest


@pytest.mark.xdist_group("one")
@pytest.mark.timeout(1)
def test_holds_the_lock():
    with open(os.environ["RUNS"], "a") as runs:
        runs.write("ran\\n")
    # a second lock of a (zeroed: glibc's initializer) mutex its thread holds already, called without releasing the
    # interpreter's lock: it waits forever, and no signal ends the wait
    libc, mutex = ctypes.PyDLL(None), ctypes.create_string_buffer(64)
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)
"""


def run_group(
    tmp_path: Path, *options: str, before_s: float = 0.0, tests: str = GROUP, **env: str
) -> tuple[subprocess.CompletedProcess, list[str]]:
    (tmp_path / "test_group.py").write_text(tests)
    runs = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RUNS": str(runs), "BEFORE_S": str(before_s), **env}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.watchdog", "-p", "no:cacheprovider", "-n", "1"]
        + ["--dist", "loadgroup", "-rA", *options, "test_group.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
    )
    return done, runs.read_text().split() if runs.exists() else []


@pytest.mark.long_running(seconds=6)
def test_a_test_that_ended_its_worker_is_not_run_again_and_its_group_goes_on(tmp_path):
    done, runs = run_group(tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert runs == ["ran", "after"], out  # once, not once per replacement worker; the rest of its group ran
    assert "not run again: this test ended its worker" in out, out
    assert "PASSED test_group.py::test_after_it" in out, out


@pytest.mark.long_running(seconds=8)
def test_a_replacement_worker_keeps_the_runs_deadline(tmp_path):
    # the worker ends after the run's 2 s: its replacement, started past them, starts nothing (pytest-timeout alone
    # gives it 2 s of its own from its start, and it would run the group's rest)
    done, runs = run_group(tmp_path, "--session-timeout", "2", before_s=3.0)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert runs == ["ran"], out
    assert "session-timeout" in out, out


@pytest.mark.long_running(seconds=8)
def test_a_test_holding_the_interpreters_lock_gets_its_native_stacks_printed(tmp_path):
    # pytest-timeout's signal and the watchdog's thread both wait for the lock: the native stacks (halfway through
    # the backstop) and faulthandler's dump (at its end) are what end the worker and tell why
    done, runs = run_group(tmp_path, tests=HOLDS_THE_LOCK, KQP_WATCHDOG_MARGIN_S="1", KQP_WATCHDOG_BACKSTOP_S="4")
    out = done.stdout + done.stderr
    assert done.returncode == 1 and runs == ["ran"], out
    native = out[out.index("+++ watchdog: test_group.py::test_holds_the_lock@one holds its worker; native stacks") :]
    assert "pthread_mutex_lock" in native and "test_holds_the_lock (test_group.py:" in native, native
    assert "Timeout (0:00:06)!" in out, out  # faulthandler's, after the native stacks
    assert "not run again: this test ended its worker" in out, out
