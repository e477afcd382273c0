"""Where the suite's time goes: with ``KQP_TEST_TIMELINE`` set to a file, every test (each xdist worker's) appends
one JSON line there: its node id, worker, xdist group, when it started and ended (wall clock), the CPU its worker's
process tree used meanwhile (its threads, the brokers, proxies and JVMs it started), and the machine's idle CPU over the same
span (from /proc/stat). `python tools/suite_timeline.py FILE` reads it: each group's span and the machine's idle
share over the run tell whether `make test` waits for its longest group or for the cores. Unset, nothing is done."""

from __future__ import annotations

import json
import os
import resource
import time

import pytest

PATH = os.environ.get("KQP_TEST_TIMELINE")


TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu() -> float:
    """CPU seconds of this worker's whole process tree: each live process's own and its waited-for children's
    (brokers, proxy processes and Spark's JVM are children the worker waits for only when they end); without
    /proc, the worker's own and its waited-for children's."""
    from tests.conftest import process_tree  # here: conftest imports this module

    total = 0.0
    for pid in process_tree(os.getpid()) if os.path.isdir("/proc") else ():
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:  # ended meanwhile: its parent's waited-for children's time has it
            continue
        utime, stime, cutime, cstime = (float(v) for v in stat[stat.rfind(")") + 2 :].split()[11:15])
        total += (utime + stime + cutime + cstime) / TICK
    if total:
        return total
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _machine() -> tuple[float, float]:
    """(busy, idle) jiffies of every core since boot; (0, 0) where there is no /proc."""
    try:
        with open("/proc/stat") as f:
            fields = [float(v) for v in f.readline().split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    return sum(fields) - idle, idle


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not PATH:
        yield
        return
    started, cpu, machine = time.time(), _cpu(), _machine()
    yield
    ended, busy_idle = time.time(), _machine()
    group = next((m.args[0] for m in item.iter_markers("xdist_group") if m.args), None)
    line = {
        "test": item.nodeid,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "group": group,
        "start": round(started, 3),
        "end": round(ended, 3),
        "cpu": round(_cpu() - cpu, 3),
        "busy": busy_idle[0] - machine[0],
        "idle": busy_idle[1] - machine[1],
    }
    with open(PATH, "a") as f:  # one short line per write: the workers' lines do not interleave
        f.write(json.dumps(line) + "\n")
