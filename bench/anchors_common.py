"""What the anchor benchmarks (bench/anchors_*.py) share: Apache Kafka from the project's jars, the proxy as its own
process in front of it, process CPU time, the machine's load, and the verdict lines every script prints.

The anchors are what operators compare the proxy with: the broker's own quotas (kafka-configs on the broker,
clients connecting directly), Strimzi's kafka-quotas-plugin loaded into the broker, and a pass-through relay. Kafka
is tests/kafka_cluster.py's ``KafkaCluster`` (KRaft, docker-compose.yml's kafka-1 settings), so the benchmarks run
the broker the integration tests prove.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import free_port, wait_for_port, wait_ready  # noqa: E402
from tests.kafka_cluster import CONFIGS, KafkaCluster  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def load() -> str:
    """The 1-minute load average, as recorded beside each figure (the machine is shared)."""
    return f"{os.getloadavg()[0]:.1f}"


def user_system_seconds(pid: int, task: int | str | None = None) -> tuple[float, float]:
    """User and system CPU seconds of one process (its threads included, its children not), or of one of its
    threads (``task``, a name in /proc/PID/task)."""
    path = f"/proc/{pid}/stat" if task is None else f"/proc/{pid}/task/{task}/stat"
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def cpu_seconds(pid: int, task: int | str | None = None) -> float:
    """User + system CPU seconds of one process, or of one of its threads (:func:`user_system_seconds`)."""
    user, system = user_system_seconds(pid, task)
    return user + system


def compiler_user_system_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of a JVM's JIT compiler threads (C1 and C2), which keep compiling for minutes
    after start-up; (0, 0) for a process without them."""
    user = system = 0.0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/comm") as f:
                if "CompilerThre" not in f.read():
                    continue
            task_user, task_system = user_system_seconds(pid, task)
        except OSError:  # a compiler thread that ended meanwhile
            continue
        user, system = user + task_user, system + task_system
    return user, system


class PluginCluster(KafkaCluster):
    """A ``KafkaCluster`` whose JVMs also load ``classpath`` (a broker plugin's jars) and whose nodes may run
    inside ``wrapper`` (a command prefix, e.g. a user namespace mounting a bounded filesystem on the log dir)."""

    def __init__(self, *args, classpath: list[Path] = (), wrapper=None, **kwargs) -> None:
        self.classpath = list(classpath)
        self.wrapper = wrapper
        super().__init__(*args, **kwargs)

    def java(self, main_class, *args, directory=None):
        command = super().java(main_class, *args, directory=directory)
        if self.classpath:
            at = command.index("-cp") + 1
            command[at] = ":".join([command[at], *map(str, self.classpath)])
        if self.wrapper is not None and main_class == "kafka.Kafka":
            command = self.wrapper(command)
        return command


def stop_process(proc: subprocess.Popen | None) -> None:
    """SIGTERM, then SIGKILL after 15 s: a relay that does not stop cleanly still stops."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def kafka_client_quota(cluster: KafkaCluster, client_id: str, **config) -> None:
    """A client-id quota set in Kafka itself: kafka-configs.sh --bootstrap-server <broker> --alter."""
    values = ",".join(f"{k}={v}" for k, v in config.items())
    cluster.tool(
        CONFIGS,
        "--bootstrap-server",
        cluster.nodes[0].direct,
        "--alter",
        "--entity-type",
        "clients",
        "--entity-name",
        client_id,
        "--add-config",
        values,
    )


@dataclass
class ProxyProcess:
    """``python -m proxy.cli run`` in front of ``upstream``, listening on ``port``; dynamic config off unless the
    config says otherwise (a benchmark's quotas are its YAML's). With ``broker_port_base`` the listener is in
    cluster mode (broker N served on ``broker_port_base + N``), else a sidecar's."""

    port: int
    upstream: str
    quotas: list = field(default_factory=list)
    settings: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    broker_port_base: int = 0
    proc: subprocess.Popen | None = None
    metrics_port: int = 0
    python: list = field(default_factory=list)  # the interpreter's options before ``-m proxy.cli`` (a profiler's)

    def start(self) -> ProxyProcess:
        self.metrics_port = free_port()
        listener: dict = {"name": "PLAINTEXT", "bind": f"127.0.0.1:{self.port}"}
        if self.broker_port_base:
            listener["broker_port_base"] = self.broker_port_base
        config = {
            "upstream": {"bootstrap_servers": [self.upstream]},
            "listeners": [listener],
            "metrics": {"bind": f"127.0.0.1:{self.metrics_port}"},
            "dynamic_config": {"enabled": False},
            **self.extra,
        }
        if self.settings:
            config["settings"] = self.settings
        if self.quotas:
            config["quotas"] = self.quotas
        fd, path = tempfile.mkstemp(suffix=".yaml", prefix="anchor-proxy-")
        with os.fdopen(fd, "w") as f:
            json.dump(config, f)  # JSON is YAML
        self.proc = subprocess.Popen(
            [sys.executable, *self.python, "-m", "proxy.cli", "run", "--config", path, "--log-level", "WARNING"],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
        )
        wait_for_port(self.port, 60)
        wait_ready(self.metrics_port)
        return self

    def stop(self) -> None:
        stop_process(self.proc)

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)

    def metric(self, name: str, **labels) -> float:
        """The sum of ``kafka_quota_proxy_<name>`` over the series whose labels include ``labels``."""
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).read().decode()
        total = 0.0
        pattern = re.compile(rf"^kafka_quota_proxy_{name}(?:\{{(.*?)\}})? (\S+)$", re.M)
        for found in pattern.finditer(text):
            have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', found.group(1) or ""))
            if all(have.get(k) == str(v) for k, v in labels.items()):
                total += float(found.group(2))
        return total


class Verdicts:
    """Figures against the targets a script claims; ``exit_code()`` is 1 when any target was missed."""

    def __init__(self) -> None:
        self.missed: list[str] = []

    def check(self, what: str, ok: bool, detail: str) -> bool:
        print(f"  {'MET ' if ok else 'MISSED'} {what}: {detail}")
        if not ok:
            self.missed.append(what)
        return ok

    def exit_code(self) -> int:
        if self.missed:
            print(f"{len(self.missed)} target(s) missed: {', '.join(self.missed)}")
            return 1
        print("every claimed target met")
        return 0


def percentile(values, q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def median(values) -> float:
    return statistics.median(values) if values else float("nan")


def now() -> float:
    return time.monotonic()
