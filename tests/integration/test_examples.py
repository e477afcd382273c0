"""Every configuration under ``examples/`` is checked and started against a broker: here the ones Tansu answers as
Kafka does (sidecar, cluster mode, cluster budgets, volume usage), with kafka-python producing and consuming through
the proxy; the SASL and TLS ones against Apache Kafka's SASL and SSL listeners in
tests/integration/kafka/test_examples_security.py. What each test makes local is listed in its ``changes``
(tests/example_files.py); the rest runs as shipped."""

from __future__ import annotations

import pytest

from proxy.cli.main import main as cli
from tests.example_files import EXAMPLES, localized
from tests.harness import Tansu, cluster_ports, free_port, proxy_in_front, wait_until
from tests.integration import clients as c

pytestmark = pytest.mark.integration

TANSU_NODE_ID = 111  # what Tansu reports as its node id
STARTED_HERE = {"sidecar.yaml", "cluster-mode.yaml", "cluster-budgets.yaml", "volume-usage.yaml"}
STARTED_AGAINST_KAFKA = {"sasl.yaml", "tls.yaml"}  # tests/integration/kafka/test_examples_security.py


def test_every_example_is_started_by_a_test_and_the_ones_without_files_check_as_shipped(capsys, monkeypatch):
    assert {p.name for p in EXAMPLES.glob("*.yaml")} == STARTED_HERE | STARTED_AGAINST_KAFKA
    monkeypatch.setenv("KAFKA_NODE_ID", "1")  # volume-usage.yaml's broker_id, as its comment says to run it
    for name in sorted(STARTED_HERE):  # no file of the machine's in them: valid as an operator copies them
        assert cli(["check-config", "--config", str(EXAMPLES / name)]) == 0, capsys.readouterr().err
        assert capsys.readouterr().err == "", f"check-config warns of {name}"


def round_trip(bootstrap: str, topic: str) -> None:
    c.kp_create_topic(bootstrap, topic, 2)
    c.kp_produce(bootstrap, topic, 200, acks="all")
    c.assert_exactly_once_in_order(c.kp_consume(bootstrap, topic, 200), 200)


def sidecar_changes(proxy_port: int, broker_port: int) -> dict:
    """Tansu has one listener: the own clients' PROXIES listener is Tansu's too (it advertises the proxy, whose
    sidecar recognises their connections by their sockets)."""
    return {
        "listeners[0].bind": f"127.0.0.1:{proxy_port}",
        "upstream.bootstrap_servers": [f"127.0.0.1:{broker_port}"],
        "upstream.own_clients.bootstrap_servers": [f"127.0.0.1:{broker_port}"],
        "metrics.bind": "127.0.0.1:0",
    }


def test_the_sidecar_example(tmp_path):
    proxy_port, broker_port = free_port(), free_port()
    raw, _ = localized("sidecar.yaml", tmp_path, sidecar_changes(proxy_port, broker_port))
    with proxy_in_front(Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start(), raw) as proxy:
        wait_until(
            lambda: proxy.metric("kafka_quota_proxy_dynamic_config_available") == 1,
            30,
            "the config topic created and read",
        )
        round_trip(proxy.bootstrap, "example-sidecar")


def test_the_cluster_mode_example(tmp_path):
    """Tansu advertises itself: only the proxy's rewriting keeps the client on the proxy's broker ports."""
    broker_port = free_port()
    bootstrap, base = cluster_ports()
    raw, _ = localized(
        "cluster-mode.yaml",
        tmp_path,
        {
            "listeners[0].bind": f"127.0.0.1:{bootstrap}",
            "listeners[0].broker_port_base": base,
            "listeners[0].advertised_host": "127.0.0.1",
            "upstream.bootstrap_servers": [f"127.0.0.1:{broker_port}"],
            "metrics.bind": "127.0.0.1:0",
        },
    )
    with proxy_in_front(Tansu(broker_port, advertised=f"127.0.0.1:{broker_port}").start(), raw) as proxy:
        round_trip(proxy.bootstrap, "example-cluster-mode")
        served = proxy.scraped("kafka_quota_proxy_requests_total")
        assert any(dict(labels).get("api") == "Fetch" for labels, n in served.items() if n)


def test_the_cluster_budgets_example_publishes_to_its_usage_topic(tmp_path):
    proxy_port, broker_port = free_port(), free_port()
    raw, _ = localized("cluster-budgets.yaml", tmp_path, sidecar_changes(proxy_port, broker_port))
    with proxy_in_front(Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start(), raw) as proxy:
        round_trip(proxy.bootstrap, "example-cluster-budgets")
        wait_until(
            lambda: proxy.metric("kafka_quota_proxy_cluster_usage_records_total", direction="sent") > 0,
            30,
            "a usage record published to the cluster's usage topic",
        )


def test_the_volume_usage_example_publishes_and_follows_its_broker_s_volume(tmp_path):
    proxy_port, broker_port = free_port(), free_port()
    (tmp_path / "data").mkdir()
    raw, _ = localized(
        "volume-usage.yaml",
        tmp_path,
        {
            **sidecar_changes(proxy_port, broker_port),
            "volume_usage.publisher.broker_id": TANSU_NODE_ID,
            "volume_usage.publisher.log_dirs": [str(tmp_path / "data")],
        },
    )
    with proxy_in_front(Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start(), raw) as proxy:
        # missing_data_action PAUSE until its own snapshot is read back; then OPEN or THROTTLE, as the disk is
        wait_until(
            lambda: (
                proxy.metric("kafka_quota_proxy_volume_state", state="PAUSE") == 0
                and proxy.metric("kafka_quota_proxy_volume_state", state="OPEN")
                + proxy.metric("kafka_quota_proxy_volume_state", state="THROTTLE")
                == 1
            ),
            60,
            "the broker's volume published and followed",
        )
        round_trip(proxy.bootstrap, "example-volume-usage")
