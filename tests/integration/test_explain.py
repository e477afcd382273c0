"""``kafka-quota-proxy explain`` (the installed console script) against a running proxy with ``workers: 2``: a
confluent-kafka producer at its default settings, flat out past its ``producer_byte_rate``, is explained as throttled
by its entry at its level, with a rate above the limit and a throttle in force; a client under its limit is
explained as not throttled; every worker answers."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.harness import wait_until
from tests.integration import clients as c
from tests.integration.workers import workers_proxy

pytestmark = pytest.mark.integration

QUOTA = 64 * 1024  # bytes/s of client-id "flood": a producer flat out is far over it
QUOTAS = (
    f"[{{entity: {{client-id: flood}}, producer_byte_rate: {QUOTA}}}, "
    "{entity: {client-id: '<default>'}, producer_byte_rate: 104857600}]"
)
CLI = str(Path(sys.executable).with_name("kafka-quota-proxy"))


def explain(ops_port: int, client_id: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            CLI,
            "explain",
            "--ops",
            f"http://127.0.0.1:{ops_port}",
            "--client-id",
            client_id,
            "--ip",
            "127.0.0.1",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def produce_findings(whole: dict) -> list[dict]:
    return [f for answer in whole["answers"] for f in answer["findings"] if f["quota"] == "producer_byte_rate"]


@pytest.mark.long_running(seconds=20)
def test_explain_names_the_entry_the_rate_and_the_throttle_of_a_throttled_client_on_every_worker(tmp_path):
    from confluent_kafka import Producer

    with workers_proxy(tmp_path, 2, quotas=QUOTAS) as (_, bootstrap, ops_port, _):
        c.ck_create_topic(bootstrap, "flood", 2)
        halt = threading.Event()
        producer = Producer({"bootstrap.servers": bootstrap, "client.id": "flood"})
        flooding = threading.Thread(target=c.ck_flat_out, args=(producer, "flood", b"x" * 1000, halt, None))
        flooding.start()
        try:

            def throttled() -> dict | None:
                run = explain(ops_port, "flood", "--json")
                assert run.returncode == 0, run.stderr
                whole = json.loads(run.stdout)
                return whole if any(f["verdict"] == "THROTTLED" for f in produce_findings(whole)) else None

            whole = wait_until(throttled, 60, "explain says the flood is throttled")
            text = explain(ops_port, "flood")
        finally:
            halt.set()
            flooding.join(30)
        assert whole["verdict"] == "THROTTLED" and whole["unanswered"] == []
        assert sorted(a["worker"] for a in whole["answers"]) == ["0", "1"]
        assert sum(a["connections_open"] for a in whole["answers"]) >= 1  # the producer's, on whichever worker
        found = [f for f in produce_findings(whole) if f["verdict"] == "THROTTLED"]
        assert {(f["entity"], f["level"], f["limit"]) for f in found} == {("/clients/flood", 7, QUOTA)}
        assert all(f["measured"] > QUOTA and f["throttle_ms"] > 0 for f in found)
        assert all(f["overridden"] == ["/clients/<default> = 104857600"] for f in produce_findings(whole))
        assert text.returncode == 0, text.stderr
        assert 'client-id "flood", from 127.0.0.1:' in text.stdout and "worker 0:" in text.stdout
        assert "worker 1:" in text.stdout and "entry /clients/flood: level 7 of 8 (/clients/<client-id>)" in text.stdout

        calm = explain(ops_port, "calm", "--json", "--ops", f"127.0.0.1:{ops_port}")  # host:port, as metrics.bind
        assert calm.returncode == 0, calm.stderr
        whole = json.loads(calm.stdout)
        assert whole["verdict"] == "NOT_THROTTLED" and len(whole["answers"]) == 2
        assert {(f["entity"], f["level"], f["verdict"]) for f in produce_findings(whole)} == {
            ("/clients/<default>", 8, "WITHIN")
        }
        refused = explain(ops_port, "calm", "--listener", "NOPE")
        assert refused.returncode == 2 and "no listener 'NOPE'" in refused.stderr
