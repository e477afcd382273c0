"""The compose deployment's monitoring end to end, on Apache Kafka: the three brokers of docker-compose.yml (the
``kafka3`` fixture), each with its sidecar configured from deploy/compose/proxy-N.yaml, a real Prometheus configured
from deploy/prometheus/prometheus.yml with deploy/prometheus/alerts.yml loaded as it is, and traffic that trips the
deployed quotas:

- a confluent-kafka producer (idempotent: producer ids) flat out to one partition, over the 1 MiB/s per-client-id
  producer_byte_rate of that partition's broker,
  and a consumer reading it back (consumer_byte_rate);
- a topic created through the proxies (controller mutations), an ip entity's quota written live to the config topic
  (through the brokers' PROXIES listener: on the compose files' PLAINTEXT no client is an admin of the proxies),
  one malformed frame (a frame error);
- new connections from 127.0.0.2 at ~300/s, over the deployed connection_creation_rate of 50/s per IP.

Asserted: every rule of alerts.yml is evaluated by Prometheus without error (health ok); the throttle counter of
producer_byte_rate rises; the two alerts the churn trips (KafkaQuotaProxyConnectionAcceptThrottled,
KafkaQuotaProxyConnectionsRefused with reason connection_rate_ip) are pending or firing for the proxy the
connections went to, and for no other; and every query of every panel of the Grafana dashboards
(deploy/grafana/dashboards) returns at least one series, but the few that have series only after a failure the run
does not cause (``NOT_IN_A_HEALTHY_RUN``; every panel still has one query that must). KafkaQuotaProxyEntityThrottled
cannot go pending here: seconds of throttling over its deployed [5m] window are far below its 0.25 threshold
(tests/integration/test_deploy_metrics.py shows it firing with the windows cut).

First, before the rest: one broker's volume data is missing, and KafkaQuotaProxyVolumeDataMissing fires naming
that broker (its ``node_id``), not the sidecars that report it (their scrape's ``broker`` target label), and no
series of any proxy carries an ``exported_*`` label (no label the proxy exports collides with one the scrape config
adds). The missing broker's sidecar (and so its volume publisher) is started only after the alert has fired: one that
leads neither the volume-usage nor the config topic (the others' own clients write them through PROXIES, on
their leader). Stopping a running publisher instead would wait out the shipped ``freshness_seconds`` (60 s) before the data
counts as missing; a publisher that never ran makes it missing at once, through the same metric and rule.

Only addresses, ports and paths of the deployment files are rewritten (``REWRITTEN``, checked: nothing else
differs), and one key is added: ``volume_usage.topic``, a volume-usage topic of this test's own, because kafka3 is
shared and another test's sidecars may have left snapshots on the shipped default topic that stay fresh for a minute
(a broker would then not be missing); Prometheus scrapes and evaluates every second instead of every 15 s, and its rules are a copy of alerts.yml
whose only change is KafkaQuotaProxyVolumeDataMissing's ``for: 2m`` cut to 1 s (checked).
"""

from __future__ import annotations

import contextlib
import copy
import socket
import struct
import threading
import time
from pathlib import Path

import pytest
import yaml

from config.loader import parse_config
from tests.harness import free_port, start_proxy, wait_until
from tests.integration import clients as c
from tests.integration.quota_apis import described, write_config_entry
from tests.kafka_cluster import stop_all, unique_topic
from tests.kafka_settings import compose_env, listener_map
from tests.prometheus_tools import (
    PROMETHEUS_DIR,
    ROOT,
    Prometheus,
    alert_rules,
    dashboard_queries,
    grafana_expr,
    rules_with_for,
    tool,
)
from tests.shipped_configs import disk_states

pytestmark = pytest.mark.integration

SCRAPE_S = 1
CHURN_IP = "127.0.0.2"  # the connection churn's source address: the other clients (127.0.0.1) are not held
CHURN_RATE = 300  # new connections / s, 6 x the deployed 50/s per IP (and under the proxy-wide 200/s
CHURN_S = 5  # once the held ones are not counted)
# The dashboard queries that have series only after what a healthy run does not do, so not required here: shadow
# mode (quota.mode shadow), a volume past its soft limit (produce scaled: the volume_usage throttle) or a broker with
# no fresh snapshot, a broker lost or timing out, a client at its in-flight bound. Each panel has another query.
NOT_IN_A_HEALTHY_RUN = {
    'sum by (quota) (rate(kafka_quota_proxy_quota_shadow_throttles_total{instance=~"$instance", broker=~"$broker"}'
    "[$__rate_interval]))",
    'sum(rate(kafka_quota_proxy_quota_throttle_time_seconds_total{instance=~"$instance", broker=~"$broker", '
    'user=~"$tenant", quota="volume_usage"}[$__rate_interval]))',
    'max by (node_id) (kafka_quota_proxy_volume_missing_data{instance=~"$instance", node_id=~"$broker"})',
    'sum by (kind) (rate(kafka_quota_proxy_upstream_errors_total{instance=~"$instance", broker=~"$broker"}'
    "[$__rate_interval]))",
    'sum(rate(kafka_quota_proxy_connection_inflight_bound_reached_total{instance=~"$instance", broker=~"$broker"}'
    "[$__rate_interval]))",
}
MISSING_ALERT = "KafkaQuotaProxyVolumeDataMissing"
VOLUME_TOPIC = unique_topic("__kafka_quota_proxy_volume_usage-e2e")  # this test's own (the module docstring says why)
CONFIG_TOPIC = "__kafka_quota_proxy_configs"  # the shipped default
# Paths (in the YAML) of the values of deploy/compose/proxy-N.yaml the test rewrites: addresses, ports and paths.
REWRITTEN = {
    ("upstream", "bootstrap_servers"),
    ("upstream", "own_clients", "bootstrap_servers"),
    ("listeners", 0, "bind"),
    ("listeners", 1, "bind"),
    ("metrics", "bind"),
    ("volume_usage", "publisher", "log_dirs"),
}


def flatten(value, path=()) -> dict:
    if isinstance(value, dict):
        return {p: v for key, item in value.items() for p, v in flatten(item, path + (key,)).items()}
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        return {p: v for i, item in enumerate(value) for p, v in flatten(item, path + (i,)).items()}
    return {path: value}


def sidecar_config(node, metrics_port: int) -> tuple[dict, int]:
    """deploy/compose/proxy-<node>.yaml for the test's node: its addresses, ports and log dir replaced, after
    checking they are the compose broker's; returns the config and the compose metrics port (Prometheus' target)."""
    deployed = yaml.safe_load((ROOT / "deploy" / "compose" / f"proxy-{node.node_id}.yaml").read_text())
    env = compose_env(node.node_id)
    client_host, client_port = listener_map(env["KAFKA_LISTENERS"])["CLIENT"]
    assert deployed["upstream"]["bootstrap_servers"] == [f"{client_host}:{client_port}"]
    proxies_host, proxies_port = listener_map(env["KAFKA_LISTENERS"])["PROXIES"]
    assert deployed["upstream"]["own_clients"]["bootstrap_servers"] == [f"{proxies_host}:{proxies_port}"]
    listener, admin = deployed["listeners"]
    assert int(listener["bind"].rsplit(":", 1)[1]) == listener_map(env["KAFKA_ADVERTISED_LISTENERS"])["CLIENT"][1]
    assert admin["admin"] is True and admin["bind"].startswith("127.0.0.1:")
    assert deployed["volume_usage"]["publisher"]["broker_id"] == node.node_id
    assert deployed["volume_usage"]["publisher"]["log_dirs"] == [env["KAFKA_LOG_DIRS"]]
    config = copy.deepcopy(deployed)
    config["upstream"]["bootstrap_servers"] = [f"127.0.0.1:{node.client_port}"]
    config["upstream"]["own_clients"]["bootstrap_servers"] = [node.proxies]
    config["listeners"][0]["bind"] = f"127.0.0.1:{node.proxy_port}"
    config["listeners"][1]["bind"] = f"127.0.0.1:{free_port()}"
    config["metrics"]["bind"] = f"127.0.0.1:{metrics_port}"
    config["volume_usage"]["publisher"]["log_dirs"] = [str(node.data_dir)]
    before, after = flatten(deployed), flatten(config)
    assert before.keys() == after.keys()
    assert {p for p in before if before[p] != after[p]} == REWRITTEN
    assert "topic" not in config["volume_usage"]
    config["volume_usage"]["topic"] = VOLUME_TOPIC  # added, not rewritten: the module docstring says why
    return config, int(deployed["metrics"]["bind"].rsplit(":", 1)[1])


def prometheus_config(workdir, targets: dict[str, str]) -> Path:
    """deploy/prometheus/prometheus.yml with each target replaced (``targets``: deployed -> test address), the
    rules file as an absolute path to a copy of alerts.yml with only KafkaQuotaProxyVolumeDataMissing's ``for:``
    cut to 1 s, and 1 s scrape and evaluation intervals."""
    deployed = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text())
    assert deployed["rule_files"] == ["alerts.yml"]
    config = copy.deepcopy(deployed)
    config["global"].update(scrape_interval=f"{SCRAPE_S}s", evaluation_interval=f"{SCRAPE_S}s")
    config["rule_files"] = [str(rules_with_for(workdir / "alerts.yml", MISSING_ALERT, "2m", "1s"))]
    (job,) = config["scrape_configs"]
    replaced = set()
    for static in job["static_configs"]:
        static["targets"] = [targets[target] for target in static["targets"]]
        replaced |= set(static["targets"])
    assert replaced == set(targets.values())
    path = workdir / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def ensure_internal_topics(kafka3) -> dict[str, int]:
    """The volume-usage and config topics created if missing (as the proxy creates them: one partition, compacted,
    the broker's replication factor), and the node id leading each."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=kafka3.direct_bootstrap, client_id="e2e-topics")
    try:
        for topic in (VOLUME_TOPIC, CONFIG_TOPIC):
            with contextlib.suppress(TopicAlreadyExistsError):
                admin.create_topics([NewTopic(topic, 1, -1, topic_configs={"cleanup.policy": "compact"})])

        def leaders():
            found = {
                t["name"]: t["partitions"][0]["leader_id"]
                for t in admin.describe_topics([VOLUME_TOPIC, CONFIG_TOPIC])
                if t["partitions"] and t["partitions"][0]["leader_id"] >= 0
            }
            return found if len(found) == 2 else None

        return wait_until(leaders, 30, "the internal topics have leaders", interval=0.5)
    finally:
        admin.close()


def missing_data_alert_names_the_missing_broker(prometheus, missing: int, reporters: set[str]) -> dict:
    """KafkaQuotaProxyVolumeDataMissing fires for ``missing`` alone, naming it; the sidecars that report it carry
    their own ``broker`` target label on the metric, and nothing is renamed ``exported_*``."""

    def firing():
        alerts = [a for a in prometheus.api("alerts")["alerts"] if a["labels"]["alertname"] == MISSING_ALERT]
        return alerts if any(a["state"] == "firing" for a in alerts) else None

    alerts = wait_until(firing, 30, f"{MISSING_ALERT} fires", interval=0.5)
    assert [(a["labels"].get("node_id"), a["state"]) for a in alerts] == [(str(missing), "firing")], alerts
    (alert,) = alerts
    assert "broker" not in alert["labels"] and "instance" not in alert["labels"], alert["labels"]
    assert alert["annotations"]["summary"] == f"No fresh volume-usage snapshot for broker {missing}"
    series = prometheus.series("kafka_quota_proxy_volume_missing_data")
    assert {(s["metric"]["broker"], s["metric"]["node_id"]) for s in series} == {(b, str(missing)) for b in reporters}
    renamed = [name for name in prometheus.api("labels") if name.startswith("exported_")]
    assert not renamed, f"labels the proxy exports collide with the scrape's target labels: {renamed}"
    return alert


@contextlib.contextmanager
def sidecars_but_one(configs: list[dict], late: int):
    """A sidecar per config but ``configs[late]``, whose slot in the list stays None until the test starts it;
    every one started is stopped at the end."""
    proxies = []
    try:
        for i, config in enumerate(configs):
            proxies.append(start_proxy(config) if i != late else None)
        yield proxies
    finally:
        stop_all([proxy for proxy in proxies if proxy is not None])


class Churn(threading.Thread):
    """New connections from CHURN_IP to ``port`` at CHURN_RATE / s for CHURN_S s, each closed at once."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.opened = 0
        self.halt = threading.Event()

    def run(self) -> None:
        start = time.monotonic()
        while not self.halt.is_set() and time.monotonic() - start < CHURN_S:
            with socket.socket() as s:
                s.bind((CHURN_IP, 0))
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST: no TIME_WAIT
                try:
                    s.connect(("127.0.0.1", self.port))
                    self.opened += 1
                except OSError:
                    pass
            delay = start + self.opened / CHURN_RATE - time.monotonic()
            if delay > 0:
                time.sleep(delay)  # deliberate: paced at CHURN_RATE connections a second


class FlatOut(threading.Thread):
    """A confluent-kafka producer (idempotent) keeping its queue full of 16 KiB records for ``topic``'s partition 0:
    the deployed producer_byte_rate is per client id on each broker, so the producer is over it where it writes
    once it writes faster than 1 MiB/s. Spread over the three brokers it had to write 3 MiB/s, through replication
    3 and ``acks=all``: beside the rest of the suite it did not, and nothing throttled it."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.halt = threading.Event()
        self.delivered = 0

    def on_delivery(self, err, msg) -> None:
        if err is None:
            self.delivered += 1

    def run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "client.id": "e2e-flat-out",
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "queue.buffering.max.kbytes": 8192,
            }
        )
        c.ck_flat_out(producer, self.topic, b"x" * 16384, self.halt, self.on_delivery, partition=0)


def consume_for(bootstrap: str, topic: str, seconds: float, patience: float = 30) -> int:
    """Records read from the topic's start over ``seconds``, and on until the first one arrives (at most
    ``patience`` seconds in all): the producer started a moment before and may not have had one acknowledged yet."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False, "client.id": "e2e-consumer"}
    )
    got = 0
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        started = time.monotonic()
        while True:
            elapsed = time.monotonic() - started
            if elapsed >= patience or (got and elapsed >= seconds):
                break
            got += sum(1 for msg in consumer.consume(1000, 0.2) if not msg.error())
    finally:
        consumer.close()
    return got


def frame_error(port: int) -> None:
    """One frame with a negative size: the proxy closes that connection and counts a frame error."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(struct.pack(">i", -1) + b"\x00" * 16)
        try:
            assert s.recv(1) == b""
        except ConnectionResetError:
            pass


@pytest.mark.measures_rate(group="kafka3")  # real time: alerts fire and resolve on the rules' windows
def test_prometheus_evaluates_the_deployed_rules_and_dashboards_on_kafka(kafka3, tmp_path):
    tool("prometheus")  # skipped, saying so, where Prometheus cannot be installed
    started = time.monotonic()
    metrics_ports = [free_port() for _ in kafka3.nodes]
    built = [sidecar_config(node, port) for node, port in zip(kafka3.nodes, metrics_ports)]
    targets = {f"net:{deployed_port}": f"127.0.0.1:{port}" for (_, deployed_port), port in zip(built, metrics_ports)}
    topic = unique_topic("e2e-prometheus")
    bootstrap = kafka3.proxy_bootstrap
    entity = {"ip": CHURN_IP}
    phases = {}

    def phase(name):
        phases[name] = round(time.monotonic() - started, 1)

    leaders = ensure_internal_topics(kafka3)
    # the sidecar started late: one whose broker leads neither internal topic (the others' own clients reach them)
    late = next(i for i, node in enumerate(kafka3.nodes) if node.node_id not in leaders.values())
    scrape_labels = {
        static["targets"][0]: static["labels"]["broker"]
        for static in yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text())["scrape_configs"][0][
            "static_configs"
        ]
    }
    reporters = {scrape_labels[f"net:{deployed_port}"] for i, (_, deployed_port) in enumerate(built) if i != late}

    with sidecars_but_one([config for config, _ in built], late) as proxies:
        phase("sidecars but one")
        prometheus = Prometheus(tmp_path, prometheus_config(tmp_path, targets), free_port())
        producer, churn, entity_set = FlatOut(bootstrap, topic), Churn(kafka3.nodes[0].proxy_port), False
        try:
            alert = missing_data_alert_names_the_missing_broker(prometheus, kafka3.nodes[late].node_id, reporters)
            phase("missing data alert")
            proxies[late] = start_proxy(built[late][0])
            wait_until(
                lambda: not any(a["labels"]["alertname"] == MISSING_ALERT for a in prometheus.api("alerts")["alerts"]),
                30,
                f"{MISSING_ALERT} resolved once the broker's publisher runs",
                interval=0.5,
            )
            wait_until(
                lambda: prometheus.value('sum(up{job="kafka-quota-proxy"})') == 3,
                30,
                "Prometheus scrapes the three sidecars",
            )
            wait_until(lambda: prometheus.value("sum(kafka_quota_proxy_ready)") == 3, 30, "every sidecar ready")
            # the volume publishers' first snapshots: until then produce is paused (missing_data_action PAUSE)
            # OPEN, unless the machine's disk is past the shipped soft limit (tests/shipped_configs.py: disk_states)
            states = "|".join(sorted(disk_states(kafka3.directory, parse_config(built[0][0]))))
            wait_until(
                lambda: prometheus.value(f'sum(kafka_quota_proxy_volume_state{{state=~"{states}"}})') == 3,
                30,
                f"every sidecar's volume state {states}",
            )
            phase("ready")
            # no admin on the compose files' PLAINTEXT: the quota goes to the config topic through PROXIES
            write_config_entry(kafka3.nodes[0].proxies, entity, {"connection_creation_rate": 50})
            entity_set = True
            for proxy in proxies:
                wait_until(
                    lambda: described(proxy.bootstrap, entity) == {"connection_creation_rate": 50.0},
                    30,
                    "the churn IP's connection_creation_rate in force on every sidecar",
                )
            from kafka.admin import KafkaAdminClient, NewTopic

            admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="e2e-admin")
            try:
                admin.create_topics([NewTopic(topic, 3, 3)])
            finally:
                admin.close()
            phase("topic")
            producer.start()
            churn.start()
            frame_error(kafka3.nodes[1].proxy_port)
            consumed = consume_for(bootstrap, topic, 3)
            phase("consumed")
            throttled = 'sum(kafka_quota_proxy_quota_throttle_time_seconds_total{quota="producer_byte_rate"})'
            wait_until(
                lambda: prometheus.value(throttled) > 0,
                40,
                lambda: f"producer_byte_rate throttles the producer ({producer.delivered} records of 16 KiB delivered)",
            )
            phase("throttled")

            # both connection-limit rules see the churn at once (rate over [5m] > 0); `for:` keeps them pending
            tripped = {"KafkaQuotaProxyConnectionAcceptThrottled", "KafkaQuotaProxyConnectionsRefused"}

            def pending_or_firing():
                alerts = [
                    a
                    for a in prometheus.api("alerts")["alerts"]
                    if a["labels"]["alertname"] in tripped and a["state"] in ("pending", "firing")
                ]
                return alerts if {a["labels"]["alertname"] for a in alerts} == tripped else None

            alerts = wait_until(pending_or_firing, 20, f"{sorted(tripped)} pending or firing", interval=0.5)
            assert {a["labels"]["instance"] for a in alerts} == {targets["net:9464"]}, "proxy 1's, the churned"
            assert {a["labels"]["reason"] for a in alerts if "reason" in a["labels"]} == {"connection_rate_ip"}
            phase("alert")
            churn.join(CHURN_S + 5)
            producer.halt.set()
            producer.join(30)
            assert producer.delivered and consumed, (producer.delivered, consumed)
            phase("traffic stopped")

            # every rule of alerts.yml evaluated, none with an error
            names = [rule["alert"] for rule in alert_rules()]

            def evaluated():
                rules = [rule for group in prometheus.api("rules")["groups"] for rule in group["rules"]]
                return rules if all(rule["health"] != "unknown" for rule in rules) else None

            rules = wait_until(evaluated, 10, "every rule evaluated", interval=0.5)
            assert sorted(rule["name"] for rule in rules) == sorted(names)
            broken = {rule["name"]: rule.get("lastError") for rule in rules if rule["health"] != "ok"}
            assert not broken, f"rules evaluated with errors: {broken}"
            phase("rules")

            # every dashboard query returns a series (but those of NOT_IN_A_HEALTHY_RUN)
            queries = dashboard_queries()
            assert NOT_IN_A_HEALTHY_RUN <= {expr for _, _, expr in queries}
            for title in {title for _, title, expr in queries if expr in NOT_IN_A_HEALTHY_RUN}:
                assert any(expr not in NOT_IN_A_HEALTHY_RUN for _, other, expr in queries if other == title), title
            missing = {}

            def every_query_answers():
                missing.clear()
                for dashboard, title, expr in queries:
                    found = prometheus.series(grafana_expr(expr, SCRAPE_S))
                    if not found and expr not in NOT_IN_A_HEALTHY_RUN:
                        missing[f"{dashboard}: {title}"] = expr
                return not missing

            try:
                wait_until(every_query_answers, 15, "every dashboard query returns a series", interval=1)
            except AssertionError:
                raise AssertionError(f"dashboard queries without series: {missing}") from None
            phase("queries")
            active = sorted({(a["labels"]["alertname"], a["state"]) for a in prometheus.api("alerts")["alerts"]})
            print(
                f"e2e: {MISSING_ALERT} fired for broker {alert['labels']['node_id']}; {len(rules)} rules ok, {len(queries)} dashboard queries, {churn.opened} connections "
                f"churned, {producer.delivered} records delivered, {consumed} consumed; alerts {active}; "
                f"seconds since start: {phases}"
            )
        finally:
            churn.halt.set()
            producer.halt.set()
            for thread in (churn, producer):
                if thread.is_alive():
                    thread.join(30)
            prometheus.stop()
            if entity_set:
                write_config_entry(kafka3.nodes[0].proxies, entity, None)
            with contextlib.suppress(Exception):
                c.kp_delete_topic(kafka3.direct_bootstrap, topic)
            with contextlib.suppress(Exception):
                c.kp_delete_topic(kafka3.direct_bootstrap, VOLUME_TOPIC)  # this test's own
