"""The project's code for Spark's executors: the ``quota`` and ``analytics`` packages, zipped from where they are
installed and added to the application (``addPyFile``).

An executor runs Python tasks in an interpreter of its own (``PYSPARK_PYTHON``, else ``python3`` on its PATH), which
need not have this project installed: on a Spark cluster it usually has not, and on ``local[*]`` it is whatever
``python3`` the PATH finds. The replay's tasks import :mod:`analytics.replay`, :mod:`analytics.demand` and the pure
``quota`` package, and nothing outside the standard library (tests/analytics/test_shipping.py checks it), so those
two packages, read from the driver's own installation (a wheel in site-packages or a checkout alike), are all an
executor needs besides PySpark itself.

The zip lives in a temporary directory (``kqp-replay-*``) while Spark may still fetch it: to the end of the job
when the job started the session (it stops it), else to the end of the interpreter (a session the caller keeps may
start new executors, which fetch every file the application was given). It is removed whichever way the job ends:
by the block's end, at the interpreter's exit, or on SIGTERM (``analyze``'s handler, :mod:`analytics.cli`).
"""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager

PACKAGES = ("quota", "analytics")
PREFIX = "kqp-replay-"  # the temporary directory's name starts with this
_KEPT: set[str] = set()  # applications given the code for the rest of the interpreter (sessions the job did not start)
_FOLDERS: set[str] = set()  # the zips' directories not yet removed


@atexit.register
def remove_all() -> None:
    """Remove every zip this interpreter made (at its exit, and on SIGTERM: analytics.cli)."""
    for folder in list(_FOLDERS):
        shutil.rmtree(folder, ignore_errors=True)
        _FOLDERS.discard(folder)


def write_zip(path: str, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """Zip every ``.py`` file of ``packages`` (and their subpackages), as installed, into ``path``; returns the
    names written (``quota/__init__.py``, ...)."""
    names = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for package in packages:
            for base in importlib.import_module(package).__path__:
                for folder, dirs, files in os.walk(base):
                    dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                    for file in sorted(f for f in files if f.endswith(".py")):
                        source = os.path.join(folder, file)
                        name = "/".join((package, *os.path.relpath(source, base).split(os.sep)))
                        z.write(source, name)
                        names.append(name)
    return names


@contextmanager
def code_shipped(spark, session_ends_with_job: bool) -> Iterator[None]:
    """Within the block, the executors of ``spark``'s application can import :data:`PACKAGES`.
    ``session_ends_with_job``: the caller stops the session when the job ends, so the zip is removed when the block
    ends; otherwise it is given once per application and removed when the interpreter exits."""
    app = spark.sparkContext.applicationId
    if app in _KEPT:
        yield
        return
    folder = tempfile.mkdtemp(prefix=PREFIX)
    _FOLDERS.add(folder)
    kept = False
    try:
        path = os.path.join(folder, os.path.basename(folder) + ".zip")  # a name no other zip of the application has
        write_zip(path)
        spark.sparkContext.addPyFile(path)
        kept = not session_ends_with_job
        if kept:
            _KEPT.add(app)
        yield
    finally:
        if not kept:
            shutil.rmtree(folder, ignore_errors=True)
            _FOLDERS.discard(folder)


def jvm_gone(timeout_s: float = 60.0) -> None:
    """Stop the JVM PySpark started for this process, once its session is stopped, and wait for it (at most
    ``timeout_s``). The JVM removes the files it unpacked into the temporary folder (lz4-java's native library and its
    lock, for one) only as it exits, and it exits when our standard input to it closes: at the end of this process,
    after the command has returned. A run's temporary folder was then seen holding them for a moment (a scheduler or a
    script that removes the folder at once races the JVM). Nothing is done while a session is active."""
    import subprocess

    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is None or SparkContext._active_spark_context is not None:
        return
    try:
        proc.stdin.close()  # PySpark's JVM exits when its standard input ends
        proc.wait(timeout_s)
    except (OSError, ValueError):
        return  # already closed
    except subprocess.TimeoutExpired:
        return  # left to end with this process, as before
    SparkContext._gateway = SparkContext._jvm = None  # a later session in this process starts a JVM of its own
