"""A class-data sharing archive (AppCDS) of Kafka's jars, so each of the suite's Kafka JVMs starts cheaper.

The suite starts Kafka's tools (kafka-configs, kafka-topics, the perf tools, the storage tool) about a hundred times
and a dozen brokers. Most of a tool's start is loading and verifying the same classes from the same jars: with an
archive of them, kafka-topics --list costs 1.07 CPU-s instead of 2.28 (measured on this machine, against Tansu).

The archive is made once per Kafka folder and Java runtime, by one run of kafka-topics --list against a Tansu broker
started for it (a run that succeeds loads what the tools' runs load: made against a closed port, where the admin
client gives up early, the archive saved only 0.4 CPU-s a run), under a file lock so that the suite's workers
make it once between them; it is written beside Kafka's jars in the set-up's cache. Where it cannot be made (an old
Java, a read-only cache) the JVMs start without it, as before. A JVM given an archive it cannot use (another Java
runtime) ignores it: the runtime's identity is part of the file name, and the JVM's warnings go to stderr, never
into a tool's output that a test reads.

The brokers (``kafka.Kafka``) load other classes than the tools (the server, the KRaft quorum, the coordinators), so
they start from an archive of their own, made once the same way by one run of a one-node cluster (started, warmed up
as every test cluster is, and stopped cleanly: the JVM writes its archive as it exits): a three-node cluster's start
then costs 9.5 CPU-s instead of 12.6 (four starts of each, measured on this machine at load 7-12), and the suite
starts about ten brokers.
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

from tests.harness import Tansu, free_port

# The JVM's own warnings (unified logging writes them to stdout by default) go to stderr.
QUIET_JVM = ["-Xlog:disable", "-Xlog:all=warning:stderr"]
DUMP_TIMEOUT_S = 120


def _runtime_key(java: str) -> str:
    """What identifies the Java runtime an archive was made with: its real path and its file's size and time."""
    real = os.path.realpath(java)
    info = os.stat(real)
    return hashlib.sha256(f"{real}:{info.st_size}:{info.st_mtime_ns}".encode()).hexdigest()[:12]


@cache
def archive_options(libs: str, jvm_options: tuple[str, ...], kind: str = "tools") -> tuple[str, ...]:
    """The JVM options that use the archive of ``libs`` for ``kind`` ("tools", or "broker": ``kafka.Kafka``), made
    now if it is not there yet; none if it cannot be."""
    java = shutil.which("java")
    if java is None:
        return ()
    folder = Path(libs).parent / "cds"
    name = "kafka" if kind == "tools" else f"kafka-{kind}"
    archive = folder / f"{name}-{_runtime_key(java)}.jsa"
    if not archive.exists():
        try:
            folder.mkdir(exist_ok=True)
            # one lock per kind: the broker's dump run formats its storage with a tool, which may make the tools'
            with open(folder / (".lock" if kind == "tools" else f".lock-{kind}"), "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be making it: wait, then use it
                if not archive.exists():
                    (_dump if kind == "tools" else _dump_broker)(java, libs, jvm_options, folder, archive)
        except OSError:
            return ()
    return (f"-XX:SharedArchiveFile={archive}", *QUIET_JVM) if archive.exists() else ()


def dump_options(made: Path) -> tuple[str, ...]:
    """The options of a JVM that writes the archive of the classes it loaded to ``made`` as it exits."""
    return (f"-XX:ArchiveClassesAtExit={made}", *QUIET_JVM)


def _dump_broker(java: str, libs: str, jvm_options: tuple[str, ...], folder: Path, archive: Path) -> None:
    """One node started and warmed up as the tests' clusters are, then stopped cleanly (SIGTERM): its JVM writes
    the archive as it exits. A node that had to be killed may have written part of one: not kept."""
    from tests.kafka_cluster import KafkaCluster  # here: that module imports this one

    with tempfile.TemporaryDirectory(dir=folder) as work:
        made = Path(work) / archive.name
        try:
            cluster = KafkaCluster(1, "class-archive", class_dump=made).start()
        except (RuntimeError, TimeoutError, OSError):
            return
        node = cluster.nodes[0].proc
        cluster.stop(timeout=DUMP_TIMEOUT_S)
        if node is not None and node.returncode != -signal.SIGKILL and made.exists() and made.stat().st_size > 0:
            os.replace(made, archive)


def _dump(java: str, libs: str, jvm_options: tuple[str, ...], folder: Path, archive: Path) -> None:
    with tempfile.TemporaryDirectory(dir=folder) as work:
        config = Path(work) / "admin.properties"
        config.write_text("request.timeout.ms=30000\n")
        made = Path(work) / archive.name
        port = free_port()
        broker = Tansu(port, advertised=f"127.0.0.1:{port}").start()
        try:
            subprocess.run(
                [java, *jvm_options, f"-XX:ArchiveClassesAtExit={made}", *QUIET_JVM, "-cp", f"{libs}/*"]
                + ["org.apache.kafka.tools.TopicCommand", "--bootstrap-server", f"127.0.0.1:{port}"]
                + ["--list", "--command-config", str(config)],
                capture_output=True,
                timeout=DUMP_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return
        finally:
            broker.stop()
        if made.exists() and made.stat().st_size > 0:
            os.replace(made, archive)
