"""A process beside each test worker that prints the worker's native stacks when a test hangs holding the
interpreter's lock.

The watchdog (tests/watchdog.py) ends a hung test's worker from a Python thread, and when that thread cannot run,
:func:`faulthandler.dump_traceback_later` dumps every thread's Python frames and ends it. Those frames do not tell who
holds the lock: a thread inside C code (a client library, the event loop's C core) shows its last Python frame or
none. A CI run lost a worker this way in librdkafka's close (``Consumer.close()`` at the top of the main thread, the
watchdog's thread never woken), with nothing to tell which thread held the lock or where.

So each worker starts this script as a child process and tells it, at each test's start, by when the test must be
over: the moment its Python watchdog should have ended it plus half the backstop. Past that, with the worker still
running the test, the script prints ``py-spy dump --native`` of the worker (every thread's C and Python frames; py-spy
reads the worker's memory, so a held lock does not stop it), or why it could not. faulthandler's dump and the
worker's end follow as before. The script ends when the worker does (its standard
input closes).
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path


class StackWatcher:
    """The worker's side: the child process, armed per test."""

    def __init__(self, out_fd: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(os.getpid())], stdin=subprocess.PIPE, stdout=out_fd, stderr=out_fd
        )
        assert self.proc.stdin is not None
        self.pipe = self.proc.stdin

    def arm(self, seconds: float, nodeid: str) -> None:
        self._say(f"{time.time() + seconds} {nodeid}")

    def disarm(self) -> None:
        self._say("-")

    def _say(self, line: str) -> None:
        try:
            self.pipe.write(f"{line}\n".encode())
            self.pipe.flush()
        except OSError:  # the watcher is gone: the worker goes on without it
            pass


def native_stacks(pid: int) -> str:
    """Every thread of ``pid``: py-spy's native and Python frames (py-spy is in the test extra), or why not."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not os.path.exists(spy):
        return "(py-spy is not installed: `pip install -e '.[test]'` brings it)\n"
    done = subprocess.run([spy, "dump", "--native", "--pid", str(pid)], capture_output=True, text=True, timeout=60)
    return done.stdout if done.returncode == 0 else f"(py-spy failed: {done.stderr.strip()})\n"


def watch(pid: int) -> None:
    """Reads ``DEADLINE NODEID`` (a test started) and ``-`` (it ended) lines; past a deadline, prints the stacks."""
    deadline, nodeid, pending = 0.0, "", b""
    while True:
        wait = max(0.0, deadline - time.time()) if deadline else None
        if select.select([0], [], [], wait)[0]:
            chunk = os.read(0, 65536)
            if not chunk:  # the worker ended
                return
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                if line == b"-":
                    deadline = 0.0
                else:
                    at, _, test = line.decode().partition(" ")
                    deadline, nodeid = float(at), test
            continue
        sys.stdout.write(f"\n+++ watchdog: {nodeid} holds its worker; native stacks of pid {pid}:\n")
        sys.stdout.write(native_stacks(pid))
        sys.stdout.flush()
        deadline = 0.0


if __name__ == "__main__":
    watch(int(sys.argv[1]))
