"""promtool and prometheus for the deployment tests: the Debian package `prometheus` provides both. When they are
missing and the tests run as root on a machine with apt-get (CI), they are installed once (under a file lock, so
pytest-xdist workers do not race); otherwise the tests that need them are skipped, saying so."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile

import pytest

_LOCK = os.path.join(tempfile.gettempdir(), "kafka-quota-proxy-apt-prometheus.lock")
_TRIED = os.path.join(tempfile.gettempdir(), "kafka-quota-proxy-apt-prometheus.tried")


def _try_install() -> None:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return
    with open(_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one installer at a time; the others wait and then find the binaries
        if shutil.which("promtool") and shutil.which("prometheus"):
            return
        if os.path.exists(_TRIED):
            return  # a failed attempt of this machine: not again in every test
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "prometheus"]
        for step in ([install], [["apt-get", "update", "-q"], install]):
            try:
                if all(subprocess.run(cmd, env=env, capture_output=True, timeout=900).returncode == 0 for cmd in step):
                    return
            except (OSError, subprocess.TimeoutExpired):
                pass
        open(_TRIED, "w").close()


def tool(name: str) -> str:
    """The path of ``promtool`` or ``prometheus``, installed with apt-get if possible, or the test is skipped."""
    found = shutil.which(name)
    if found is None:
        _try_install()
        found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (Debian package `prometheus`: `apt-get install prometheus` as root)")
    return found
