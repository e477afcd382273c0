"""Apache Kafka clusters for tests, laid out as docker-compose.yml lays them out, run from Kafka's jars.

Each node is a KRaft broker and controller in one JVM with the compose file's listeners:

- CLIENT: what the proxy in front of the node connects to; advertised as the node's proxy (sidecar mode), so a
  client that bootstraps through a proxy keeps going through the proxies;
- REPLICATION: the inter-broker listener, which no proxy is in front of (unless ``replication_advertised`` says
  otherwise: a test that puts a cluster-mode proxy in front of replication);
- PROXIES: the proxies' own clients' listener (``upstream.own_clients``), which no proxy is in front of either,
  advertised as itself;
- CONTROLLER: the KRaft quorum.

The broker settings are read from docker-compose.yml's `kafka-N` services (their ``KAFKA_*`` environment, as the
apache/kafka image turns it into server.properties), with the compose file's addresses replaced by test ports, so
the layout the tests prove is the one the compose file ships. What the tests add is listed in ``TEST_ONLY`` and in
``DIRECT``: a plain listener advertised as itself, for the direct connections tests compare against and for
cluster-mode proxies (which learn the brokers' own addresses from it).

One node uses kafka-1's settings with the replication factors one node can hold; three nodes use kafka-1..3
unchanged (replication factor 3, ``min.insync.replicas`` 2). Node ids are the compose file's (1..3) unless
``node_ids`` gives others (as Strimzi's node pools assign them: 3, 4, 5, or ranges from ``strimzi.io/next-node-ids``):
the node with the i-th id then runs compose's kafka-i settings with that id. Every process is stopped by its PID; logs stay in
the cluster's folder and their tail is added to the report of a test that fails (tests/conftest.py).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.harness import _LIVE, free_port, proxy_config, start_proxy, wait_for_port
from tests.jvm_archive import archive_options, dump_options
from tests.kafka_settings import listener_map

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import fetch_kafka  # noqa: E402  (tools/ is not a package: the set-up script, runnable on its own)

COMPOSE = ROOT / "docker-compose.yml"

# Settings the tests add to the compose file's: fewer partitions for Kafka's internal topics (50 each by default:
# creating them with 3 replicas takes seconds the suite does not have), and a small, fast-starting JVM.
TEST_ONLY = {
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.num.partitions": "5",
    "share.coordinator.state.topic.num.partitions": "5",
    # a share member is assigned partitions at its second heartbeat: 1 s apart, not 5 s
    "group.share.min.heartbeat.interval.ms": "1000",
    "group.share.heartbeat.interval.ms": "1000",
    # the active controller's no-op record while the metadata log is idle (KIP-835): every 5 s, not every 0.5 s. Each
    # goes through every node's quorum and metadata publishing; the session clusters idle most of a run, at 2-4 CPU-s
    # per 100 s per node (0.5-0.7 of it these records). Nothing a client sees changes.
    "metadata.max.idle.interval.ms": "5000",
}
JVM_OPTIONS = [
    "-Xms128m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
]
# Replication factors for a single node (kafka-1's own are 3, which one node cannot hold).
SINGLE_NODE = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "min.insync.replicas": "1",
    "default.replication.factor": "1",
    # share groups' state (KIP-932): without these a one-node cluster cannot create __share_group_state, and no
    # share member is ever assigned a partition
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}
START_TIMEOUT_S = 90  # a JVM start on a busy 2-core machine; typically 5-10 s


CLUSTERS = ("kafka3", "kafka1")  # the session fixtures' clusters (tests/integration/conftest.py)


def cluster_of(item) -> str | None:
    """The session cluster a test uses: a fixture it names, or the ``upstream`` it is run against."""
    names = getattr(item, "fixturenames", ())
    for cluster in CLUSTERS:
        if cluster in names:
            return cluster
    callspec = getattr(item, "callspec", None)
    upstream = callspec.params.get("upstream") if callspec is not None else None
    return upstream if upstream in CLUSTERS else None


def kafka_libs() -> Path:
    """The folder of Kafka's jars, fetched by the project's set-up (tools/fetch_kafka.py) if not already there. A
    missing Java or Maven fails the test that needs Kafka with the one line naming what to install."""
    try:
        return fetch_kafka.fetch() / "libs"
    except fetch_kafka.SetupError as error:
        raise RuntimeError(f"Apache Kafka is needed for this test: {error}") from None


def compose_broker_properties(node_id: int) -> dict[str, str]:
    """server.properties of docker-compose.yml's `kafka-<node_id>`, as the apache/kafka image derives them from its
    environment (KAFKA_FOO_BAR -> foo.bar); CLUSTER_ID is returned under "cluster.id"."""
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    env = services[f"kafka-{node_id}"]["environment"]
    props = {}
    for key, value in env.items():
        if key == "CLUSTER_ID":
            props["cluster.id"] = str(value)
        elif key.startswith("KAFKA_"):
            props[key[len("KAFKA_") :].lower().replace("_", ".")] = str(value)
    return props


def _listeners(listeners: dict[str, tuple[str, int]]) -> str:
    return ",".join(f"{name}://{host}:{port}" for name, (host, port) in listeners.items())


@dataclass
class KafkaNode:
    node_id: int
    client_port: int  # the CLIENT listener: a sidecar proxy's upstream
    proxy_port: int  # where CLIENT is advertised: the sidecar proxy's own port
    replication_port: int
    controller_port: int
    direct_port: int  # DIRECT: advertised as itself (direct clients, cluster-mode proxies)
    directory: Path
    compose_id: int = 0  # the compose service whose settings it runs (kafka-<compose_id>); 0: its node id
    proxies_port: int = 0  # PROXIES: the proxies' own clients (upstream.own_clients), advertised as itself
    extra_ports: dict[str, int] = field(default_factory=dict)  # extra listener name -> its port
    extra_advertised: dict[str, int] = field(default_factory=dict)  # extra listener name -> advertised port
    proc: subprocess.Popen | None = None

    @property
    def direct(self) -> str:
        return f"127.0.0.1:{self.direct_port}"

    @property
    def proxies(self) -> str:
        return f"127.0.0.1:{self.proxies_port}"

    @property
    def log_file(self) -> Path:
        return self.directory / "server.log"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"


@dataclass
class ExtraListener:
    """A listener beyond the compose file's: ``protocol`` (SASL_PLAINTEXT, SSL, ...), advertised as a proxy's port
    (``advertise_proxy``) or as itself; ``properties`` are added with ``listener.name.<name>.`` in front."""

    protocol: str
    advertise_proxy: bool = True
    properties: dict[str, str] = field(default_factory=dict)


class KafkaCluster:
    """``nodes`` KRaft nodes (1 or 3) started from Kafka's jars; ``start()`` formats storage and waits until every
    broker is in the cluster's metadata. ``extra_listeners``: name -> ExtraListener; ``properties``: more broker
    settings (a test's own, e.g. SASL); ``replication_advertised``: node id -> port where REPLICATION is advertised
    (a proxy in front of replication); ``format_args``: more StorageTool arguments (e.g. SCRAM credentials);
    ``node_ids``: the nodes' ids, when not the compose file's 1..N."""

    def __init__(
        self,
        nodes: int = 1,
        name: str | None = None,
        *,
        extra_listeners: dict | None = None,
        properties: dict | None = None,
        replication_advertised: dict[int, int] | None = None,
        format_args: list[str] | None = None,
        node_ids: tuple[int, ...] | None = None,
        class_dump: Path | None = None,
    ) -> None:
        if nodes not in (1, 3):
            raise ValueError("the compose layout has 1 or 3 nodes")
        node_ids = tuple(node_ids or range(1, nodes + 1))
        if len(node_ids) != nodes or len(set(node_ids)) != nodes or min(node_ids) < 0:
            raise ValueError(f"{nodes} distinct node ids, not {node_ids}")
        self.libs = kafka_libs()
        self.name = name or f"kafka{nodes}"
        self.directory = Path(tempfile.mkdtemp(prefix=f"kqp-{self.name}-", dir=_logs_root()))
        self.extra_listeners = extra_listeners or {}
        self.properties = properties or {}
        self.replication_advertised = replication_advertised or {}
        self.format_args = format_args or []
        self.class_dump = class_dump  # the brokers write their classes' archive there (tests/jvm_archive.py)
        self.nodes = [self._node(i, node_id) for i, node_id in enumerate(node_ids, 1)]
        self.cluster_id = compose_broker_properties(1)["cluster.id"]

    def _node(self, compose_id: int, node_id: int) -> KafkaNode:
        node = KafkaNode(
            node_id,
            client_port=free_port(),
            proxy_port=free_port(),
            replication_port=free_port(),
            controller_port=free_port(),
            direct_port=free_port(),
            directory=self.directory / f"node-{node_id}",
            compose_id=compose_id,
            proxies_port=free_port(),
        )
        for name, listener in self.extra_listeners.items():
            node.extra_ports[name] = free_port()
            node.extra_advertised[name] = free_port() if listener.advertise_proxy else node.extra_ports[name]
        return node

    # -- addresses ------------------------------------------------------------------------------------------------

    @property
    def direct_bootstrap(self) -> str:
        """Every node's DIRECT listener: clients connecting with no proxy in the way."""
        return ",".join(node.direct for node in self.nodes)

    @property
    def proxy_bootstrap(self) -> str:
        """Every node's sidecar proxy (the CLIENT listeners' advertised addresses)."""
        return ",".join(f"127.0.0.1:{node.proxy_port}" for node in self.nodes)

    # -- settings -------------------------------------------------------------------------------------------------

    def server_properties(self, node: KafkaNode) -> dict[str, str]:
        props = compose_broker_properties(node.compose_id or node.node_id)
        props.pop("cluster.id")
        props["node.id"] = str(node.node_id)
        compose_listeners = listener_map(props["listeners"])
        compose_advertised = listener_map(props["advertised.listeners"])
        own = {
            "CLIENT": node.client_port,
            "REPLICATION": node.replication_port,
            "CONTROLLER": node.controller_port,
            "PROXIES": node.proxies_port,
        }
        listeners = {name: ("127.0.0.1", own[name]) for name in compose_listeners}
        advertised = {name: ("127.0.0.1", {**own, "CLIENT": node.proxy_port}[name]) for name in compose_advertised}
        if node.node_id in self.replication_advertised:
            advertised["REPLICATION"] = ("127.0.0.1", self.replication_advertised[node.node_id])
        listeners["DIRECT"] = advertised["DIRECT"] = ("127.0.0.1", node.direct_port)
        protocols = dict(item.split(":") for item in props["listener.security.protocol.map"].split(","))
        protocols["DIRECT"] = "PLAINTEXT"
        for name, listener in self.extra_listeners.items():
            listeners[name] = ("127.0.0.1", node.extra_ports[name])
            advertised[name] = ("127.0.0.1", node.extra_advertised[name])
            protocols[name] = listener.protocol
            for key, value in listener.properties.items():
                props[f"listener.name.{name.lower()}.{key}"] = value
        props["listeners"] = _listeners(listeners)
        props["advertised.listeners"] = _listeners(advertised)
        props["listener.security.protocol.map"] = ",".join(f"{k}:{v}" for k, v in protocols.items())
        props["controller.quorum.voters"] = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        props["log.dirs"] = str(node.data_dir)
        props.update(TEST_ONLY)
        if len(self.nodes) == 1:
            props.update(SINGLE_NODE)
        props.update(self.properties)
        return props

    def _write(self, node: KafkaNode) -> Path:
        node.directory.mkdir(parents=True, exist_ok=True)
        path = node.directory / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.server_properties(node).items()))
        (node.directory / "log4j2.properties").write_text(_LOG4J.format(log=node.log_file))
        return path

    def java(self, main_class: str, *args: str, directory: Path | None = None) -> list[str]:
        log4j = (directory or self.directory) / "log4j2.properties"
        if not log4j.exists():
            log4j.parent.mkdir(parents=True, exist_ok=True)
            log4j.write_text(_LOG4J.format(log=log4j.parent / "tools.log"))
        # tests/jvm_archive.py: a cheaper start, from the brokers' own archive for a broker; a cluster making the
        # archives uses none (its broker writes one)
        kind = "broker" if main_class == "kafka.Kafka" else "tools"
        if self.class_dump is None:
            shared = archive_options(str(self.libs), kind)
        else:
            shared = dump_options(self.class_dump) if kind == "broker" else ()
        return [
            "java",
            *JVM_OPTIONS,
            *shared,
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            f"{self.libs}/*",
            main_class,
            *args,
        ]

    # -- life cycle -----------------------------------------------------------------------------------------------

    def start(self) -> KafkaCluster:
        paths = [self._write(node) for node in self.nodes]

        def format_storage(args):
            node, path = args
            result = subprocess.run(
                self.java(
                    "kafka.tools.StorageTool",
                    "format",
                    "-t",
                    self.cluster_id,
                    "-c",
                    str(path),
                    *self.format_args,
                    directory=node.directory,
                ),
                capture_output=True,
                text=True,
                timeout=120,
            )
            if result.returncode != 0:
                raise RuntimeError(f"formatting node {node.node_id}'s storage failed:\n{result.stdout}{result.stderr}")

        with ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(format_storage, zip(self.nodes, paths)))
        try:
            for node, path in zip(self.nodes, paths):
                self._start_node(node, path)
            self.wait_ready()
            if not self.replication_advertised:  # replication through a proxy not started yet: its test warms it
                self.warm_up()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_node(self, node: KafkaNode, path: Path) -> None:
        out = open(node.directory / "stdout.log", "ab")
        node.proc = subprocess.Popen(
            self.java("kafka.Kafka", str(path), directory=node.directory),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        out.close()
        _LIVE.add(node.proc)

    def restart_node(self, node: KafkaNode) -> None:
        """Stop one node (SIGTERM, a clean shutdown) and start it again on the same ports and data."""
        self.stop_node(node)
        self._start_node(node, node.directory / "server.properties")
        self.wait_ready()

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        """Every node's DIRECT port open and every broker registered in the cluster's metadata."""
        from kafka import KafkaAdminClient  # kafka-python: a plain Metadata request, here only to wait

        deadline = time.monotonic() + timeout
        for node in self.nodes:
            self._check_alive(node)
            wait_for_port(node.direct_port, timeout=max(1.0, deadline - time.monotonic()))
        while True:
            for node in self.nodes:
                self._check_alive(node)
            try:
                admin = KafkaAdminClient(bootstrap_servers=self.direct_bootstrap, request_timeout_ms=5000)
                try:
                    brokers = admin.describe_cluster()["brokers"]
                finally:
                    admin.close()
                if len(brokers) == len(self.nodes):
                    return
            except Exception:  # noqa: BLE001  (not ready yet: any error means ask again)
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.name}: not every broker registered within {timeout} s; "
                    f"logs in {self.directory}\n{self.log_tail()}"
                )
            time.sleep(0.3)  # a bounded condition wait (ask the cluster again)

    def warm_up(self, records_per_partition: int = 500) -> None:
        """What a fresh cluster does once, done before any test measures it: a topic with a partition led by each
        node and every replica (acks=all), written, read back by a consumer group (which creates
        __consumer_offsets) and deleted. The first tests on a cluster just started were its slowest: on a busy
        2-core machine the first produce, group join and topic creation of each node took seconds (class loading,
        compilation, the internal topic's replicas), inside the first test's measurement window. The group member is
        librdkafka's: kafka-python 3.0.12 drops a join its leader completes after a poll's timeout
        (tests/integration/kafka/test_writes_at_pause.py), which would leave it reading nothing for the 60 s."""
        from confluent_kafka import Consumer
        from kafka import KafkaProducer
        from kafka.admin import KafkaAdminClient, NewTopic

        topic = f"__warm-up-{self.name}"
        nodes = len(self.nodes)
        admin = KafkaAdminClient(bootstrap_servers=self.direct_bootstrap, request_timeout_ms=30000)
        try:
            admin.create_topics([NewTopic(topic, nodes, nodes)])
            producer = KafkaProducer(bootstrap_servers=self.direct_bootstrap, acks="all", linger_ms=5)
            try:
                value = b"w" * 512
                for partition in range(nodes):
                    for _ in range(records_per_partition):
                        producer.send(topic, value, partition=partition)
                producer.flush(60)
            finally:
                producer.close()
            consumer = Consumer(
                {
                    "bootstrap.servers": self.direct_bootstrap,
                    "group.id": f"__warm-up-{self.name}",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                }
            )
            consumer.subscribe([topic])
            try:
                deadline, read = time.monotonic() + 60, 0
                while read < nodes * records_per_partition and time.monotonic() < deadline:
                    read += sum(m.error() is None for m in consumer.consume(1000, 0.5))
                if read:
                    consumer.commit(asynchronous=False)
            finally:
                consumer.close()
            admin.delete_topics([topic])
        finally:
            admin.close()

    def all_running(self) -> bool:
        return not any(map(_exited, self.nodes))

    def revive(self) -> list[int]:
        """Every node found exited started again on its ports and data, the cluster then awaited as at its start;
        the ids of those restarted (none: every node was running)."""
        dead = [node for node in self.nodes if _exited(node)]
        for node in dead:
            if node.proc is not None:
                _LIVE.discard(node.proc)
            self._start_node(node, node.directory / "server.properties")
        if dead:
            self.wait_ready()
        return [node.node_id for node in dead]

    def _check_alive(self, node: KafkaNode) -> None:
        if _exited(node):
            raise RuntimeError(f"{self.name} node {node.node_id} exited; logs in {node.directory}\n{self.log_tail()}")

    def stop_node(self, node: KafkaNode, timeout: float = 30.0) -> None:
        proc = node.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        _LIVE.discard(proc)
        node.proc = None

    def stop(self, kill: bool = False, timeout: float = 20) -> None:
        """Every node stopped by its PID: SIGTERM to all at once (a 3-node quorum shuts down together), SIGKILL
        to whatever has not exited after ``timeout`` s; ``kill``: SIGKILL at once (a cluster whose data no one reads
        again, spared the seconds of a controlled shutdown)."""
        for node in self.nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            if node.proc is None:
                continue
            try:
                node.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait(10)
            _LIVE.discard(node.proc)
            node.proc = None

    def log_tail(self, lines: int = 30) -> str:
        out = []
        for node in self.nodes:
            for path in (node.log_file, node.directory / "stdout.log"):
                if path.exists():
                    text = path.read_text(errors="replace").splitlines()[-lines:]
                    if text:
                        out.append(f"--- {path} (last {len(text)} lines)")
                        out.extend(text)
        return "\n".join(out)

    # -- proxies in front -----------------------------------------------------------------------------------------

    def sidecar_config(self, node: KafkaNode, quotas: list | None = None, **settings) -> dict:
        """A sidecar proxy's config for ``node``: bound where the node advertises CLIENT, in front of CLIENT."""
        return proxy_config(node.proxy_port, node.client_port, quotas, **settings)

    @contextmanager
    def sidecars(self, quotas: list | None = None, configs: list[dict] | None = None, **settings):
        """One proxy in front of each node (sidecar mode), as the compose file runs them; yields the proxies."""
        configs = configs or [self.sidecar_config(node, quotas, **settings) for node in self.nodes]
        proxies = []
        try:
            for config in configs:
                proxies.append(start_proxy(config))
            yield proxies
        finally:
            stop_all(proxies)

    # -- Kafka's own tools ----------------------------------------------------------------------------------------

    def tool(
        self, main_class: str, *args: str, timeout: float = 120, check: bool = True, input: str | None = None
    ) -> subprocess.CompletedProcess:
        """Run one of Kafka's command-line tools (ConfigCommand, TopicCommand, ...) from the same jars."""
        result = subprocess.run(
            self.java(main_class, *args), capture_output=True, text=True, timeout=timeout, input=input
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"{main_class} {' '.join(args)} exited {result.returncode}:\n"
                f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
            )
        return result


def _exited(node: KafkaNode) -> bool:
    """The node's process is not running (never started, stopped, or exited by itself)."""
    return node.proc is None or node.proc.poll() is not None


def stop_all(proxies) -> None:
    """Stop proxies all at once: a sidecar stopping after the one in front of its usage topic's leader waits out its
    own client's bounded stop (about 5 s); side by side, the waits overlap instead of adding up."""
    if len(proxies) <= 1:
        for proxy in proxies:
            proxy.stop()
        return
    with ThreadPoolExecutor(len(proxies)) as pool:
        for done in [pool.submit(proxy.stop) for proxy in proxies]:
            done.result()


# Kafka's tools by the names of their scripts.
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
TOPICS = "org.apache.kafka.tools.TopicCommand"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"


def _logs_root() -> str:
    """Kafka's logs and data for this test process: build/kafka-tests/<time>-<pid>-<worker>/ in the work tree
    (ignored by git), one folder per cluster inside, kept after the run for a failure's post-mortem. Folders of
    processes that have ended are removed once more than 20 are there, oldest first, and the brokers' data (up to
    1.8 GB a folder after the benchmarks) is removed from all but the last 6 (one `make test`'s workers): their logs
    stay. A running process's folder is never touched (its clusters may still be up). Kept whole, 20 folders filled
    a machine's disk past the shipped volume-usage soft limit, which then throttled the tests' own produce."""
    root = ROOT / "build" / "kafka-tests"
    root.mkdir(parents=True, exist_ok=True)
    ended = sorted((p for p in root.iterdir() if p.is_dir() and not _running(p.name)), key=lambda p: p.stat().st_mtime)
    for old in ended[:-20]:
        shutil.rmtree(old, ignore_errors=True)
    for old in ended[-20:-6]:
        for data in old.glob("*/node-*/data"):
            shutil.rmtree(data, ignore_errors=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    folder = root / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{worker}"
    folder.mkdir(exist_ok=True)
    return str(folder)


def _running(name: str) -> bool:
    """Whether the process whose pid a logs folder's name holds is alive."""
    try:
        pid = int(name.split("-")[2])
        os.kill(pid, 0)
    except (IndexError, ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


_LOG4J = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.controller.name = org.apache.kafka.controller
logger.controller.level = INFO
"""


_NAME_OK = re.compile(r"^[A-Za-z0-9._-]+$")


def unique_topic(prefix: str) -> str:
    """A topic name no earlier test on a shared cluster has used."""
    name = f"{prefix}-{os.getpid()}-{time.monotonic_ns() % 10**9}"
    assert _NAME_OK.match(name)
    return name
