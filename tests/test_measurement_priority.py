"""The suite's own measurement priority (tests/conftest.py): a broker a rate measurement goes through is raised
thread by thread for the test and put back after, threads started meanwhile included."""

import os
import subprocess
import sys

import pytest

from tests.conftest import MEASUREMENT_NICE, _threads, process_tree, raise_threads, restore_threads

# A process with a few threads, which starts one more when told to (a broker's pool growing during a test).
THREADS = """
import sys, threading, time
def idle():
    time.sleep(60)
for _ in range(3):
    threading.Thread(target=idle, daemon=True).start()
print("ready", flush=True)
sys.stdin.readline()
threading.Thread(target=idle, daemon=True).start()
print("more", flush=True)
time.sleep(60)
"""


def nice_of(tid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, tid)


def test_every_thread_of_a_broker_is_raised_for_the_test_and_put_back_after():
    proc = subprocess.Popen([sys.executable, "-c", THREADS], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        before = {tid: nice_of(tid) for tid in _threads(proc.pid)}
        assert len(before) >= 4
        try:
            saved = raise_threads([proc.pid], MEASUREMENT_NICE)
        except PermissionError:
            pytest.skip("raising a priority needs root or CAP_SYS_NICE here")
        if not saved or any(nice_of(tid) != MEASUREMENT_NICE for tid in before):
            pytest.skip("raising a priority is refused here")
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "more"
        started = set(_threads(proc.pid)) - set(before)
        assert started and all(nice_of(tid) == MEASUREMENT_NICE for tid in started), "inherits the raised nice"
        restore_threads(saved)
        after = {tid: nice_of(tid) for tid in _threads(proc.pid)}
        assert {tid: after[tid] for tid in before} == before
        assert all(after[tid] == before[min(before)] for tid in started), "a thread started meanwhile: its process's"
    finally:
        proc.kill()
        proc.wait(10)


def test_a_broker_gone_before_the_test_ends_is_skipped():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    proc.kill()
    proc.wait(10)
    assert raise_threads([proc.pid], MEASUREMENT_NICE) == {}
    restore_threads({proc.pid: (0, {proc.pid: 0})})  # nothing to put back, and no error


def test_the_tree_holds_the_worker_its_children_and_theirs():
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
            "'import time; time.sleep(60)']); print('up', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "up"
        tree = process_tree(os.getpid())
        assert tree[0] == os.getpid() and child.pid in tree
        below = process_tree(child.pid)
        assert len(below) == 2 and below[1] in tree, "the child's own child is in the worker's tree"
    finally:
        for pid in process_tree(child.pid)[::-1]:
            os.kill(pid, 9)
        child.wait(10)
