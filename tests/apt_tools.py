"""Command-line tools the deployment tests need from Debian packages (``promtool`` and ``prometheus`` from
`prometheus`, ``kubectl`` from `kubectl`). When one is missing and the tests run as root on a machine with apt-get
(CI), its package is installed once, under a file lock so that pytest-xdist workers do not race; otherwise the test
that needs it is skipped, saying which package to install."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile

import pytest


def _try_install(package: str, binaries: tuple[str, ...]) -> None:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return
    lock_path = os.path.join(tempfile.gettempdir(), f"kafka-quota-proxy-apt-{package}.lock")
    tried = os.path.join(tempfile.gettempdir(), f"kafka-quota-proxy-apt-{package}.tried")
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one installer at a time; the others wait and then find the binaries
        if all(shutil.which(b) for b in binaries):
            return
        if os.path.exists(tried):
            return  # a failed attempt of this machine: not again in every test
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", package]
        for step in ([install], [["apt-get", "update", "-q"], install]):
            try:
                if all(subprocess.run(cmd, env=env, capture_output=True, timeout=900).returncode == 0 for cmd in step):
                    return
            except (OSError, subprocess.TimeoutExpired):
                pass
        open(tried, "w").close()


def tool(name: str, package: str, binaries: tuple[str, ...] = ()) -> str:
    """The path of the command ``name``, installed with apt-get (``package``, which also provides ``binaries``) if
    possible, or the test is skipped."""
    found = shutil.which(name)
    if found is None:
        _try_install(package, binaries or (name,))
        found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (Debian package `{package}`: `apt-get install {package}` as root)")
    return found
