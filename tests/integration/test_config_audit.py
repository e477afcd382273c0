"""Quota changes are audited (issue 44), seen from outside: the proxy in its own process in front of Tansu, an admin
changing a quota twice with ``kafka-quota-proxy configs`` (AlterClientQuotas through the proxy); the proxy's log
says who, from where, the entity and the values before and after, and the config records read back from the topic
carry the same in their ``kafka-quota-proxy-audit`` header. A record written straight to the topic at the broker is
logged as such when the proxy reads it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.harness import Tansu, free_port, proxy_config, wait_for_port, wait_until
from tests.integration.faults import ROOT
from tests.integration.raw import produce_at_broker

pytestmark = pytest.mark.integration

CONFIG_TOPIC = "__kafka_quota_proxy_configs"


def configs(bootstrap: str, *argv: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "proxy.cli", "configs", "--bootstrap-server", bootstrap, *argv],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=60,
    )


def audit_headers(bootstrap: str, count: int) -> list[dict]:
    """The audit headers of the first ``count`` records of the config topic, read by a client (kafka-python)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        CONFIG_TOPIC,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
        enable_auto_commit=False,
        group_id=None,
    )
    try:
        records = []
        for record in consumer:
            records.append(record)
            if len(records) == count:
                break
    finally:
        consumer.close()
    return [json.loads(dict(r.headers)["kafka-quota-proxy-audit"]) for r in records]


def test_a_quota_changed_twice_is_logged_and_its_records_say_who_wrote_them(tmp_path):
    proxy_port, broker_port, metrics_port = free_port(), free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    config = proxy_config(proxy_port, broker_port)
    config["metrics"] = {"bind": f"127.0.0.1:{metrics_port}"}
    config["dynamic_config"] = {}
    config["admin_principals"] = ["User:ANONYMOUS"]  # a plaintext listener: every client is ANONYMOUS
    path = tmp_path / "proxy.yaml"
    path.write_text(yaml.safe_dump(config))
    log_path = tmp_path / "proxy.log"
    with open(log_path, "w") as log_file:
        proxy = subprocess.Popen(
            [sys.executable, "-m", "proxy.cli", "run", "--config", str(path), "--log-level", "INFO"],
            cwd=ROOT,
            stderr=log_file,
            stdout=log_file,
        )
    try:
        wait_for_port(proxy_port, timeout=30)
        bootstrap = f"127.0.0.1:{proxy_port}"
        for rate in ("1000", "2500"):
            configs(
                bootstrap,
                "--alter",
                "--entity-type",
                "users",
                "--entity-name",
                "alice",
                "--add-config",
                f"producer_byte_rate={rate}",
            )
        audits = audit_headers(bootstrap, 2)
        produce_at_broker(broker_port, CONFIG_TOPIC, [('{"user":"bob"}', b'{"producer_byte_rate": 7}')])
        wait_until(lambda: "past the proxy" in log_path.read_text(), 20, "the change written past the proxy logged")
        # the topic is made by the first write: its first record is read as the topic's history, the second live
        wait_until(
            lambda: "through the proxy (AlterClientQuotas)" in log_path.read_text(),
            20,
            "the proxy following its config topic logged the change it read back",
        )
    finally:
        proxy.terminate()
        proxy.wait(30)
        broker.stop()
    assert [(a["old"], a["new"]) for a in audits] == [
        (None, {"producer_byte_rate": 1000}),
        ({"producer_byte_rate": 1000}, {"producer_byte_rate": 2500}),
    ]
    assert {(a["principal"], a["address"], a["via"]) for a in audits} == {
        ("User:ANONYMOUS", "127.0.0.1", "AlterClientQuotas")
    }
    lines = [line for line in log_path.read_text().splitlines() if "kafka_quota_proxy.audit" in line]
    assert len(lines) == 2, lines
    assert lines[1].endswith(
        'AlterClientQuotas by User:ANONYMOUS from 127.0.0.1: {"user":"alice"}: '
        '{"producer_byte_rate": 1000} -> {"producer_byte_rate": 2500}'
    )
    assert any(
        line.endswith(
            'config topic __kafka_quota_proxy_configs: {"user":"bob"}: (none) -> '
            '{"producer_byte_rate": 7} (no audit header: written straight to the topic, past the proxy)'
        )
        for line in log_path.read_text().splitlines()
    )
    followed = [line for line in log_path.read_text().splitlines() if "through the proxy" in line]
    assert followed[-1].endswith(
        'config topic __kafka_quota_proxy_configs: {"user":"alice"}: {"producer_byte_rate": '
        '1000} -> {"producer_byte_rate": 2500} (written by User:ANONYMOUS from 127.0.0.1 '
        "through the proxy (AlterClientQuotas))"
    ), followed
