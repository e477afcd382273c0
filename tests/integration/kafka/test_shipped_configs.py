"""Every proxy configuration the repository ships, run as shipped: each proxy its own OS process (as containers and
pods are: nothing shared between them but the cluster), PLAINTEXT, in front of a 3-node Apache Kafka with the
listeners the manifests declare (CLIENT advertised as the sidecars, REPLICATION, CONTROLLER, and PROXIES for the
proxies' own clients, advertised as the brokers themselves).

- compose: deploy/compose/proxy-{1,2,3}.yaml in front of the ``kafka3`` cluster (docker-compose.yml's brokers, ids
  1-3, the compose file's listeners).
- Kubernetes, sidecar and cluster mode: the ConfigMaps' proxy.yaml (tests/shipped_configs.py), each sidecar with the
  environment its container spec declares (``${env:KAFKA_NODE_ID}`` from the pod index), in front of a cluster of
  this module whose node ids are as Strimzi's node pools assign them (3, 4 and 10: not 0..N-1, not contiguous). The
  StatefulSet gives the kafka container's node id and the proxy's KAFKA_NODE_ID from the same pod-index field, so
  each sidecar is rendered as the pod whose index is its broker's id.

What the test rewrites, and nothing else (each found exactly once in the file, or the test fails): the addresses
and ports (upstream.bootstrap_servers, upstream.own_clients.bootstrap_servers, listeners[].bind, metrics.bind, and
in cluster mode listeners[].advertised_host and broker_port_base) made local ports of the test cluster, and the
volume publisher's log_dirs made the node's data folder. The cluster-mode proxy's upstream (a Strimzi bootstrap
Service: its plain listener, which advertises the brokers' pods) is the test nodes' DIRECT listener, the one that
advertises the brokers themselves.

On every proxy: ready (the config topic read to its end), the volume usage of all three brokers fresh and the state
OPEN (from /metrics), produce through every sidecar acknowledged (kafka-python at its defaults, one producer per
sidecar, a topic with a partition led by each broker), never paused. Quotas as an operator changes them: a quota
altered through a proxy's public listener is refused (PLAINTEXT: everyone is User:ANONYMOUS, which no shipped file
lists as an admin); the same command through that proxy's admin listener (127.0.0.1, what an operator reaches with
``exec`` into the pod or the compose namespace) is accepted and then in force on every proxy, each its own process
(described by each through its public listener); the admin listener cannot be reached from the machine's
non-loopback address. Kafka's own kafka-configs through the sidecars of both layouts, the proxy's ``configs``
(sparing a JVM) through the cluster-mode proxy; the test's entry is removed again through the admin listener.
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from config.loader import load_config_text
from proxy.cli import configs
from tests.harness import _LIVE, cluster_ports, free_port, wait_until
from tests.integration.quota_apis import described
from tests.kafka_cluster import CONFIGS, KafkaCluster, stop_all, unique_topic
from tests.shipped_configs import COMPOSE_PROXIES, disk_states, proxy_environment, rendered, shipped_proxy_configs

pytestmark = pytest.mark.integration

STRIMZI_NODE_IDS = (3, 4, 10)  # a broker pool after a controller pool [0-2], scaled with next-node-ids [10-20]
MESSAGES = 30  # per producer: every one acknowledged


@pytest.fixture(scope="module")
def strimzi_ids_cluster():
    cluster = KafkaCluster(3, "kafka3-strimzi-ids", node_ids=STRIMZI_NODE_IDS).start()
    yield cluster
    cluster.stop(kill=True)  # the module's own: nothing reads its data again


class ProxyProcess:
    """``python -m proxy.cli run`` on a configuration text with an environment of its own; its log in ``folder``."""

    def __init__(self, name: str, text: str, env: dict[str, str], folder: Path) -> None:
        self.name = name
        self.config = load_config_text(text, env)
        self.path = folder / f"{name}.yaml"
        self.path.write_text(text)
        self.log = folder / f"{name}.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "proxy.cli", "run", "--config", str(self.path)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},
            )
        _LIVE.add(self.proc)  # killed at exit if a failure skipped stop()

    @property
    def bootstrap(self) -> str:
        return str(self.config.listeners[0].bind)

    @property
    def admin(self) -> str:
        """The admin listener's address (its connections are admins: what operators alter quotas through)."""
        (admin,) = [lc for lc in self.config.listeners if lc.admin]
        return str(admin.bind)

    def url(self, path: str) -> str:
        return f"http://{self.config.metrics.bind}{path}"

    def ready(self) -> bool:
        assert self.proc.poll() is None, f"{self.name} exited {self.proc.returncode}:\n{self.log.read_text()[-3000:]}"
        try:
            with urllib.request.urlopen(self.url("/readyz"), timeout=5) as answer:
                return answer.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def samples(self, name: str) -> dict[tuple, float]:
        with urllib.request.urlopen(self.url("/metrics"), timeout=10) as answer:
            text = answer.read().decode()
        return {
            tuple(sorted(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == name
        }

    def volume(self) -> tuple[str, set[str]]:
        """The volume state, and the brokers with a fresh snapshot (the label values of snapshot ages)."""
        states = [dict(labels)["state"] for labels, v in self.samples("kafka_quota_proxy_volume_state").items() if v]
        missing = {labels for labels, v in self.samples("kafka_quota_proxy_volume_missing_data").items() if v}
        ages = self.samples("kafka_quota_proxy_volume_snapshot_age_seconds")
        fresh = {value for labels in ages for key, value in labels if key not in ("instance", "job")}
        return (states[0] if len(states) == 1 else str(states)), (set() if missing else fresh)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        _LIVE.discard(self.proc)


def localized(text: str, rewrites: dict[str, str]) -> str:
    """``text`` with each key replaced by its value; each key must be in the text exactly once."""
    for old, new in rewrites.items():
        assert text.count(old) == 1, f"{old!r} is in the shipped file {text.count(old)} times: rewrite it knowingly"
        text = text.replace(old, new)
    return text


def sidecar_rewrites(text: str, env: dict[str, str], node) -> dict[str, str]:
    """Addresses, ports and the data path of a sidecar's file, made the test node's (the module docstring's list)."""
    cfg = load_config_text(text, env)
    (upstream,), (log_dir,) = cfg.upstream.bootstrap_servers, cfg.volume_usage.publisher.log_dirs
    rewrites = {
        f'"{upstream}"': f'"127.0.0.1:{node.client_port}"',
        f'"{cfg.listeners[0].bind}"': f'"127.0.0.1:{node.proxy_port}"',
        f'"{cfg.metrics.bind}"': f'"127.0.0.1:{free_port()}"',
        f"[{log_dir}]": f"[{node.data_dir}]",
        **admin_rewrite(cfg),
    }
    if cfg.upstream.own_clients is not None:  # (a file without it runs without it: the failure it shows is real)
        (own,) = cfg.upstream.own_clients.bootstrap_servers
        rewrites[f'"{own}"'] = f'"{node.proxies}"'
    return rewrites


def admin_rewrite(cfg) -> dict[str, str]:
    """The admin listener's port made a free one (its host kept: the shipped loopback bind is what is tested)."""
    (admin,) = [lc for lc in cfg.listeners if lc.admin]
    assert admin.bind.host == "127.0.0.1", admin
    return {f'"{admin.bind}"': f'"127.0.0.1:{free_port()}"'}


def start(proxies_args, folder: Path) -> list[ProxyProcess]:
    proxies = [ProxyProcess(name, text, env, folder) for name, text, env in proxies_args]
    try:
        for proxy in proxies:
            wait_until(proxy.ready, 90, f"{proxy.name} ready (broker answered, config topic read)")
    except BaseException:
        stop_all(proxies)
        raise
    return proxies


def check_volume_fresh(proxies: list[ProxyProcess], node_ids: set[int], states: set[str]) -> None:
    """Every broker's volume usage fresh on every proxy, in the state the disk is in (``disk_states``: OPEN unless
    the machine's disk is past the shipped soft limit; a CI run on a disk 80.2 % used was throttled, rightly)."""
    fresh = {str(n) for n in node_ids}
    for proxy in proxies:
        try:
            wait_until(
                lambda: proxy.volume()[0] in states and proxy.volume()[1] == fresh,
                60,
                f"{proxy.name}: volume usage of brokers {sorted(node_ids)} fresh and {' or '.join(sorted(states))}",
            )
        except AssertionError as failure:
            refused = proxy.log.read_text().count("TopicAuthorizationFailed")
            raise AssertionError(
                f"{failure}; (state, fresh brokers) now {proxy.volume()}; {refused} publications "
                "refused with TopicAuthorizationFailed in its log"
            ) from None


def produce_through_each(proxies: list[ProxyProcess], cluster: KafkaCluster, states: set[str]) -> None:
    """A producer at kafka-python's defaults bootstrapped on each proxy, MESSAGES each to a topic with a partition
    led by every broker: every message acknowledged, the volume state one of ``states`` on every proxy afterwards."""
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = unique_topic("shipped")
    admin = KafkaAdminClient(bootstrap_servers=cluster.direct_bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 3, 3)])
    finally:
        admin.close()
    for proxy in proxies:
        producer = KafkaProducer(bootstrap_servers=proxy.bootstrap)
        try:
            sent = [producer.send(topic, f"{proxy.name}-{n}".encode(), partition=n % 3) for n in range(MESSAGES)]
            acked = [future.get(timeout=60) for future in sent]
        finally:
            producer.close(10)
        assert len(acked) == MESSAGES and {meta.partition for meta in acked} == {0, 1, 2}, proxy.name
    for proxy in proxies:
        assert proxy.volume()[0] in states, f"{proxy.name}: {proxy.volume()}, not {states}"


def configs_command(cluster: KafkaCluster, java: bool, bootstrap: str, *args: str) -> tuple[int, str]:
    """kafka-configs (Kafka's own, ``java``; else the proxy's ``configs``) through ``bootstrap``: (exit code, output)."""
    if java:
        done = cluster.tool(CONFIGS, "--bootstrap-server", bootstrap, *args, check=False)
        return done.returncode, done.stdout + done.stderr
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = configs.main(["--bootstrap-server", bootstrap, *args])
    return code, out.getvalue()


def check_quotas(proxies: list[ProxyProcess], cluster: KafkaCluster, java: bool = True) -> None:
    """The module docstring's quota checks, through the first proxy (Kafka's two alters side by side: a JVM each;
    the proxy's own one after the other: it prints to this process's stdout)."""
    client = unique_topic("shipped-client")
    entity = ["--entity-type", "clients", "--entity-name", client]
    alter = ["--alter", *entity, "--add-config", "producer_byte_rate=4096"]
    with ThreadPoolExecutor(2 if java else 1) as pool:
        refused, accepted = pool.map(
            lambda at: configs_command(cluster, java, at, *alter), [proxies[0].bootstrap, proxies[0].admin]
        )
    assert refused[0] != 0 and "User:ANONYMOUS may not alter quotas" in refused[1], refused[1]
    try:
        assert accepted[0] == 0, accepted[1]
        for proxy in proxies:
            wait_until(
                lambda: described(proxy.bootstrap, {"client-id": client}) == {"producer_byte_rate": 4096.0},
                30,
                f"{proxy.name}: the quota altered through {proxies[0].name}'s admin listener in force",
            )
        check_unreachable_from_outside(proxies[0].admin)
    finally:
        code, said = configs_command(
            cluster, False, proxies[0].admin, "--alter", *entity, "--delete-config", "producer_byte_rate"
        )
        assert code == 0, said


def check_unreachable_from_outside(admin: str) -> None:
    """A connection to the admin listener's port at this machine's non-loopback address is refused, while a socket
    bound to every address on this machine accepts one there (so the address is reachable: the bind decides)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("198.51.100.1", 9))  # no packet sent: the kernel picks the source address of that route
        outside = probe.getsockname()[0]
    assert not ipaddress.ip_address(outside).is_loopback, outside
    with socket.create_server(("0.0.0.0", 0)) as control:
        socket.create_connection((outside, control.getsockname()[1]), timeout=10).close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((outside, int(admin.rsplit(":", 1)[1])), timeout=10)


def proxies_folder(cluster: KafkaCluster, name: str) -> Path:
    """Where a test's proxies' files and logs go: beside the cluster's logs, kept for a failure's post-mortem."""
    folder = cluster.directory / name
    folder.mkdir(exist_ok=True)
    return folder


# Its publishers leave fresh snapshots on kafka3's shipped volume-usage topic for freshness_seconds (60 s);
# test_prometheus_e2e.py, which needs a broker with none, has a volume-usage topic of its own, so the order of the
# two in the kafka3 group does not matter.
def test_compose_proxies_as_shipped(kafka3):
    folder = proxies_folder(kafka3, "compose-proxies")
    nodes = {node.node_id: node for node in kafka3.nodes}
    args = []
    for path in COMPOSE_PROXIES:
        text = path.read_text()
        node = nodes[load_config_text(text, {}).volume_usage.publisher.broker_id]
        args.append((path.stem, localized(text, sidecar_rewrites(text, {}, node)), {}))
    proxies = start(args, folder)
    states = disk_states(kafka3.directory, load_config_text(COMPOSE_PROXIES[0].read_text(), {}))
    try:
        check_volume_fresh(proxies, set(nodes), states)
        produce_through_each(proxies, kafka3, states)
        check_quotas(proxies, kafka3)
    finally:
        stop_all(proxies)
    for proxy in proxies:
        log = proxy.log.read_text()
        assert "TopicAuthorizationFailed" not in log and "upstream.own_clients is not set" not in log, proxy.name


def k8s_sidecar_args(cluster: KafkaCluster) -> list[tuple[str, str, dict]]:
    text = shipped_proxy_configs("sidecar")
    args = []
    for node in cluster.nodes:
        env = proxy_environment("sidecar", node.node_id)  # the pod whose index is this broker's id
        args.append((f"kafka-{node.node_id}", localized(text, sidecar_rewrites(text, env, node)), env))
    return args


@pytest.mark.xdist_group("kafka3-strimzi-ids")  # a serial group of its own: started early, its cluster with it
@pytest.mark.long_running(seconds=60)
@pytest.mark.own_cluster  # strimzi_ids_cluster starts inside its timeout
def test_k8s_sidecars_and_cluster_mode_as_shipped(strimzi_ids_cluster):
    cluster = strimzi_ids_cluster
    folder = proxies_folder(cluster, "k8s-proxies")
    sidecars = start(k8s_sidecar_args(cluster), folder)
    proxies = list(sidecars)
    states = disk_states(cluster.directory, rendered("sidecar", 0))
    try:
        check_volume_fresh(sidecars, set(STRIMZI_NODE_IDS), states)
        produce_through_each(sidecars, cluster, states)
        check_quotas(sidecars, cluster)
        # cluster mode: the cluster ConfigMap's proxy in front of the same brokers (their ids 3, 4, 10 each on a port)
        text = shipped_proxy_configs("cluster")
        env = proxy_environment("cluster", 0)
        cfg = load_config_text(text, env)
        (upstream,), listener = cfg.upstream.bootstrap_servers, cfg.listeners[0]
        bootstrap_port, base = cluster_ports(max(STRIMZI_NODE_IDS) + 1)  # base + every id free
        metrics_port = free_port()
        rewrites = {
            f'"{upstream}"': f'"{cluster.nodes[0].direct}"',
            f'"{listener.bind}"': f'"127.0.0.1:{bootstrap_port}"',
            f"broker_port_base: {listener.broker_port_base}": f"broker_port_base: {base}",
            f"advertised_host: {listener.advertised_host}": "advertised_host: 127.0.0.1",
            f'"{cfg.metrics.bind}"': f'"127.0.0.1:{metrics_port}"',
            **admin_rewrite(cfg),
        }
        (clustered,) = start([("cluster-mode", localized(text, rewrites), env)], folder)
        proxies.append(clustered)
        cluster_states = disk_states(cluster.directory, cfg)
        check_volume_fresh([clustered], set(STRIMZI_NODE_IDS), cluster_states)  # DescribeLogDirs of every broker
        produce_through_each([clustered], cluster, cluster_states)
        check_quotas([clustered, *sidecars], cluster, java=False)
    finally:
        stop_all(proxies)
    for proxy in proxies:
        log = proxy.log.read_text()
        assert "TopicAuthorizationFailed" not in log and "upstream.own_clients is not set" not in log, proxy.name
