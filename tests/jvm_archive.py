"""Class-data sharing archives (AppCDS) of Kafka's jars, so each of the suite's Kafka JVMs starts cheaper.

The suite starts Kafka's tools (kafka-configs, kafka-topics, the perf tools, the storage tool) about a hundred times
and about ten brokers. Most of a JVM's start is loading and verifying the same classes from the same jars: with an
archive of them, kafka-topics --list costs 1.07 CPU-s instead of 2.28 (measured on this machine, against Tansu).

Two archives, made once per Kafka folder and Java runtime by one run of a one-node cluster (tests/kafka_cluster.py)
under a file lock, so that the suite's workers make them once between them, and written beside Kafka's jars in the
set-up's cache:

- the tools': one kafka-configs --alter against that node. Made from a tool run against Apache Kafka, it serves
  every tool better than the archive first made from kafka-topics --list against Tansu: kafka-configs --describe
  0.75 CPU-s instead of 0.94, --alter 0.68 instead of 0.82, kafka-topics --create 0.73 instead of 0.78, --describe
  0.67 instead of 0.78 (three runs of each against a one-node cluster, at load 7-9; 1.2-1.5 with no archive);
- the brokers' (``kafka.Kafka``, which loads other classes: the server, the KRaft quorum, the coordinators): the
  node itself, warmed up as every test cluster is and stopped cleanly (the JVM writes its archive as it exits). A
  three-node cluster's start costs 9.2 CPU-s with it, 12.6 with the tools' (interleaved runs, at load 7-12).

A run that fails or a node that had to be killed leaves no archive (a killed JVM may have written part of one).
Where they cannot be made (an old Java, a read-only cache) the JVMs start without them, as before. A JVM given an
archive it cannot use (another Java runtime) ignores it: the runtime's identity is part of the file name, and the
JVM's warnings go to stderr, never into a tool's output that a test reads.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
from functools import cache
from pathlib import Path

# The JVM's own warnings (unified logging writes them to stdout by default) go to stderr.
QUIET_JVM = ["-Xlog:disable", "-Xlog:all=warning:stderr"]
DUMP_TIMEOUT_S = 120


def _runtime_key(java: str) -> str:
    """What identifies the Java runtime an archive was made with: its real path and its file's size and time."""
    real = os.path.realpath(java)
    info = os.stat(real)
    return hashlib.sha256(f"{real}:{info.st_size}:{info.st_mtime_ns}".encode()).hexdigest()[:12]


@cache
def archive_options(libs: str, kind: str = "tools") -> tuple[str, ...]:
    """The JVM options that use the archive of ``libs`` for ``kind`` ("tools", or "broker": ``kafka.Kafka``), made
    now if it is not there yet; none if it cannot be."""
    java = shutil.which("java")
    if java is None:
        return ()
    folder = Path(libs).parent / "cds"
    archive = folder / archive_name(kind, java)
    if not archive.exists():
        try:
            folder.mkdir(exist_ok=True)
            with open(folder / ".lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be making them: wait, then use them
                if not archive.exists():
                    _dump(java, folder)
        except OSError:
            return ()
    return (f"-XX:SharedArchiveFile={archive}", *QUIET_JVM) if archive.exists() else ()


def archive_name(kind: str, java: str) -> str:
    return f"kafka-{kind}-{_runtime_key(java)}.jsa"


def dump_options(made: Path) -> tuple[str, ...]:
    """The options of a JVM that writes the archive of the classes it loaded to ``made`` as it exits."""
    return (f"-XX:ArchiveClassesAtExit={made}", *QUIET_JVM)


def _dump(java: str, folder: Path) -> None:
    """Both archives, from one node whose own JVMs use none (:class:`KafkaCluster`'s ``class_dump``)."""
    from tests.kafka_cluster import CONFIGS, KafkaCluster  # here: that module imports this one

    with tempfile.TemporaryDirectory(dir=folder) as work:
        made = {kind: Path(work) / archive_name(kind, java) for kind in ("tools", "broker")}
        try:
            cluster = KafkaCluster(1, "class-archive", class_dump=made["broker"]).start()
        except (RuntimeError, TimeoutError, OSError):
            return
        node = cluster.nodes[0].proc
        try:
            tool = cluster.java(CONFIGS, "--bootstrap-server", cluster.direct_bootstrap, "--alter", "--add-config")
            tool += ["producer_byte_rate=1048576", "--entity-type", "clients", "--entity-name", "class-archive"]
            done = subprocess.run(
                [tool[0], *dump_options(made["tools"]), *tool[1:]], capture_output=True, timeout=DUMP_TIMEOUT_S
            )
            if done.returncode != 0:
                made["tools"].unlink(missing_ok=True)
        except subprocess.TimeoutExpired:
            made["tools"].unlink(missing_ok=True)
        finally:
            cluster.stop(timeout=DUMP_TIMEOUT_S)
        if node is None or node.returncode == -signal.SIGKILL:
            made["broker"].unlink(missing_ok=True)
        for path in made.values():
            if path.exists() and path.stat().st_size > 0:
                os.replace(path, folder / path.name)
