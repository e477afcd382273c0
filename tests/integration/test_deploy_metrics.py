"""The deployment's monitoring against a live proxy in front of Tansu.

- Every metric name the Grafana dashboard (deploy/grafana/dashboards/) and the alert rules (deploy/prometheus/
  alerts.yml) use is in the proxy's /metrics, with every quota kind, volume usage, the usage log and the config topic
  configured, so the dashboard, the rules and the proxy cannot drift apart (the families of a workers' parent and of
  the usage topic, ``PARENT_ONLY``, are checked so in tests/integration/test_cluster_workers.py).
- A real Prometheus (Debian package `prometheus`; skipped, saying so, where it cannot be installed) scrapes the proxy
  every second while a kafka-python producer is throttled, and its HTTP API shows the throttle counter rising and
  KafkaQuotaProxyEntityThrottled going pending/firing: the real rule expressions, from a copy of alerts.yml whose
  `for:` durations cut to 1 s and range windows from minutes to seconds, so it takes seconds, not 15 minutes.
"""

from __future__ import annotations

import os
import re
import threading
import urllib.request

import pytest
import yaml

from tests.harness import Tansu, free_port, proxy_config, proxy_in_front, wait_until
from tests.integration import clients as c
from tests.prometheus_tools import METRIC_NAME, PARENT_ONLY, Prometheus, alert_metric_names, tool

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RULES = os.path.join(ROOT, "deploy", "prometheus", "alerts.yml")
DASHBOARDS = os.path.join(ROOT, "deploy", "grafana", "dashboards")
TOPIC = "throttled"
BROKER_ID = 111  # Tansu's node id


def names_used() -> dict[str, set[str]]:
    """Metric names (kafka_quota_proxy_*, process_*, python_*) in each dashboard and in the alert rules."""
    found = {}
    for name in sorted(os.listdir(DASHBOARDS)):
        with open(os.path.join(DASHBOARDS, name)) as f:
            found[name] = set(re.findall(METRIC_NAME, f.read()))
    found["alerts.yml"] = {name for name in alert_metric_names() if not re.match(PARENT_ONLY, name)}
    return found


def exposed_names(text: str) -> set[str]:
    """Every series name the exposition can have: sample names, and for families without samples yet (a
    configured quota nobody has hit) the names their # TYPE line promises."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split(" ", 3)
            base = family.removesuffix("_total")
            names |= {
                family,
                *{
                    "counter": [base + "_total"],
                    "histogram": [base + "_bucket", base + "_count", base + "_sum"],
                }.get(kind, []),
            }
        elif line and not line.startswith("#"):
            names.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
    return names


@pytest.fixture(scope="module")
def monitored(tmp_path_factory):
    """Tansu and a proxy with every quota kind, the volume-usage publisher and follower, and the config topic."""
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    config = proxy_config(
        proxy_port,
        broker_port,
        quotas=[
            {
                "entity": {"user": "<default>"},
                "producer_byte_rate": 20_000,
                "consumer_byte_rate": 10_000_000,
                "producer_ids_rate": 1000,
            },
            {"entity": {"client-id": "<default>"}, "controller_mutation_rate": 100},
            {"entity": {"ip": "<default>"}, "connection_creation_rate": 1000},
            {"entity": {"ip": "127.0.0.1"}, "connection_creation_rate": 1000},
        ],
        **{
            "quota.window.num": 2,
            "quota.window.size.seconds": 1,
            "max.connections": 1000,
            "max.connection.creation.rate": 1000,
        },
    )
    data_dir = tmp_path_factory.mktemp("log-dir")
    config["volume_usage"] = {
        "missing_data_action": "OPEN",
        "freshness_seconds": 60,
        "publisher": {
            "broker_id": BROKER_ID,
            "log_dirs": [str(data_dir)],
            "interval_seconds": 1,
            "soft_limit": {"type": "MinFreeBytes", "level": 2},
            "hard_limit": {"type": "MinFreeBytes", "level": 1},
        },
    }
    config["usage_log"] = {"dir": str(tmp_path_factory.mktemp("usage")), "interval_seconds": 1}
    with proxy_in_front(broker, config) as proxy:
        yield proxy


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def test_every_metric_in_the_dashboard_and_the_rules_is_exported(monitored):
    c.kp_create_topic(monitored.bootstrap, "names", 1)
    c.kp_produce(monitored.bootstrap, "names", 50)
    c.kp_consume(monitored.bootstrap, "names", 50)
    exposed = exposed_names(scrape(monitored.metrics_port))
    used = names_used()
    assert len(used) >= 2 and all(used.values())
    missing = {where: sorted(names - exposed) for where, names in used.items() if names - exposed}
    assert not missing, f"not in a live proxy's /metrics: {missing}"


def test_the_name_check_finds_a_name_the_proxy_does_not_export(monitored):
    exposed = exposed_names(scrape(monitored.metrics_port))
    assert "kafka_quota_proxy_quota_throttle_time_seconds_total" in exposed
    assert "kafka_quota_proxy_request_latency_seconds_bucket" in exposed
    assert "kafka_quota_proxy_quota_throttle_time_total" not in exposed  # a typo the check would report
    assert {
        "process_open_fds",
        "process_max_fds",
        "process_resident_memory_bytes",
        "python_info",
        "kafka_quota_proxy_memory_limit_bytes",
    } <= exposed
    assert 'kafka_quota_proxy_build_info{version="' in scrape(monitored.metrics_port)


class ThrottledProducer(threading.Thread):
    """kafka-python sending 1 KiB messages as fast as the proxy lets it, far over the 20 kB/s quota."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.stop = threading.Event()
        self.sent = 0

    def run(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, client_id="e2e-producer", linger_ms=5)
        try:
            while not self.stop.is_set():
                producer.send(TOPIC, b"x" * 1024)
                self.sent += 1
                if self.sent % 50 == 0:
                    producer.flush(30)
        finally:
            producer.close(10)


def start_prometheus(workdir, metrics_port: int) -> Prometheus:
    """Prometheus scraping the proxy every second, with a copy of alerts.yml whose durations are cut."""
    rules = workdir / "alerts.yml"
    with open(RULES) as f:
        text = f.read()
    # the real expressions and thresholds; only durations are cut so the alert fires within the test's seconds:
    # `for:` to 1 s, range windows from minutes to as many seconds (a [5m] rate over 10 s of samples is 1/30 of
    # the rate, so the window must shrink with the test)
    text, cut = re.subn(r"(?m)^(\s+for: )\S+$", r"\g<1>1s", text)
    text, windows = re.subn(r"\[(\d+)m\]", r"[\1s]", text)
    assert cut and windows
    rules.write_text(text)
    config = workdir / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(rules)],
                "scrape_configs": [
                    {"job_name": "kafka-quota-proxy", "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}]}
                ],
            }
        )
    )
    return Prometheus(workdir, config, free_port())


def test_prometheus_scrapes_a_throttled_producer_and_the_throttling_alert_fires(monitored, tmp_path):
    """Real seconds: Prometheus scrapes and evaluates every second; the alert needs two scrapes with throttle time
    between them, then 1 s pending. About 10 s in all."""
    prometheus_binary = tool("prometheus")
    assert prometheus_binary
    c.kp_create_topic(monitored.bootstrap, TOPIC, 1)
    prometheus = start_prometheus(tmp_path, monitored.metrics_port)
    producer = ThrottledProducer(monitored.bootstrap)
    try:
        wait_until(lambda: prometheus.value('up{job="kafka-quota-proxy"}') == 1, 30, "Prometheus scrapes the proxy")
        producer.start()
        counter = 'sum(kafka_quota_proxy_quota_throttle_time_seconds_total{quota="producer_byte_rate"})'
        first = wait_until(lambda: prometheus.value(counter), 30, "the throttle counter is above 0 in Prometheus")
        wait_until(lambda: prometheus.value(counter) > first, 30, "the throttle counter rises")
        states = set()

        def throttling_alert():
            for alert in prometheus.api("alerts")["alerts"]:
                if alert["labels"]["alertname"] == "KafkaQuotaProxyEntityThrottled":
                    assert alert["labels"]["quota"] == "producer_byte_rate"
                    assert alert["labels"]["user"] == "ANONYMOUS"
                    states.add(alert["state"])
            return "firing" in states

        wait_until(throttling_alert, 30, "KafkaQuotaProxyEntityThrottled fires")
        assert states <= {"pending", "firing"}
        assert prometheus.value('ALERTS{alertname="KafkaQuotaProxyUpstreamDown"}') == 0
    finally:
        producer.stop.set()
        if producer.is_alive():
            producer.join(30)
        prometheus.stop()
