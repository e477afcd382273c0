"""Volume usage from DescribeLogDirs (``source: describe_log_dirs``), against a scripted broker: Tansu does not
implement DescribeLogDirs, so a small broker in this test answers Metadata (itself, node 7) and DescribeLogDirs v4
(two log dirs whose usage the test sets) and accepts Produce. The proxy polls it every second and moves produce
through OPEN, THROTTLE, PAUSE and back; a broker that stops answering goes stale and the fail-safe PAUSE applies."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from proxy.codec.apis import DESCRIBE_LOG_DIRS, METADATA, PRODUCE
from proxy.codec.error_codes import NONE
from proxy.codec.header import RequestHeader
from proxy.codec.messages import decode_request, encode_response, new_response
from tests.harness import free_port, proxy_config, start_proxy, wait_until
from tests.scripted_broker import ScriptedBroker, answer_normally, produce_answer, response

pytestmark = pytest.mark.integration

NODE = 7
CAPACITY = 100 * 10**9


class LogDirsBroker:
    def __init__(self) -> None:
        self.used_percent = {"/data/a": 30, "/data/b": 10}
        self.answering = True
        self.broker = ScriptedBroker(self.answer)

    def answer(self, sock: socket.socket, header: RequestHeader, request: bytes) -> None:
        version = header.api_version
        if header.api_key == METADATA:
            msg = new_response(
                METADATA,
                version,
                brokers=[{"node_id": NODE, "host": "127.0.0.1", "port": self.broker.port}],
                cluster_id="scripted",
                controller_id=NODE,
                topics=[],
            )
            sock.sendall(response(header, encode_response(METADATA, version, msg)))
        elif header.api_key == DESCRIBE_LOG_DIRS:
            if not self.answering:
                return  # silent: the proxy's request times out
            assert decode_request(DESCRIBE_LOG_DIRS, version, request[header.header_length :]).topics == []
            msg = new_response(
                DESCRIBE_LOG_DIRS,
                version,
                error_code=NONE,
                results=[
                    {
                        "error_code": NONE,
                        "log_dir": name,
                        "topics": [],
                        "total_bytes": CAPACITY,
                        "usable_bytes": CAPACITY - used * CAPACITY // 100,
                    }
                    for name, used in self.used_percent.items()
                ],
            )
            sock.sendall(response(header, encode_response(DESCRIBE_LOG_DIRS, version, msg)))
        elif header.api_key == PRODUCE and header.acks != 0:
            sock.sendall(produce_answer(header, request))
        else:
            answer_normally(sock, header, request)


def exported(proxy, name: str) -> dict[tuple, float]:
    """The samples of ``name`` on the proxy's /metrics, by their labels (sorted (name, value) pairs)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{proxy.metrics_port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def wait_for_state(proxy, expected: str, timeout: float = 15.0) -> str:
    """The volume state as /metrics shows it, once it is ``expected``."""
    wait_until(
        lambda: proxy.metric("kafka_quota_proxy_volume_state", state=expected) == 1.0,
        timeout,
        f"volume state {expected}",
    )
    return expected


def test_describe_log_dirs_moves_produce_through_open_throttle_pause_and_back(caplog):
    scripted = LogDirsBroker()
    scripted.broker.start()
    config = proxy_config(free_port(), scripted.broker.port, **{"upstream.connect.timeout.ms": 1000})
    config["volume_usage"] = {
        "source": "describe_log_dirs",
        "freshness_seconds": 4,
        "missing_data_action": "PAUSE",
        "produce_base_rate": 1048576,
        "describe_log_dirs": {
            "interval_seconds": 1,
            "soft_limit": {"type": "MinFreePercentage", "level": 50},
            "hard_limit": {"type": "MinFreePercentage", "level": 10},
        },
    }
    proxy = start_proxy(config)
    try:
        wait_until(lambda: exported(proxy, "kafka_quota_proxy_volume_snapshot_age_seconds"), 15, "the first poll")
        assert wait_for_state(proxy, "OPEN") == "OPEN"
        assert list(exported(proxy, "kafka_quota_proxy_volume_snapshot_age_seconds")) == [(("node_id", str(NODE)),)]
        assert {dict(labels)["volume"] for labels in exported(proxy, "kafka_quota_proxy_volume_used_bytes")} == {
            "/data/a",
            "/data/b",
        }
        scripted.used_percent["/data/a"] = 70  # halfway from the soft (50 % used) to the hard limit (90 % used)
        assert wait_for_state(proxy, "THROTTLE") == "THROTTLE"
        assert proxy.metric("kafka_quota_proxy_volume_factor") == pytest.approx(0.5, abs=0.01)
        scripted.used_percent["/data/b"] = 95  # the worst volume wins
        assert wait_for_state(proxy, "PAUSE") == "PAUSE"
        scripted.used_percent.update({"/data/a": 20, "/data/b": 20})
        assert wait_for_state(proxy, "OPEN") == "OPEN"
        scripted.answering = False  # the broker stops answering DescribeLogDirs: its snapshot goes stale
        assert wait_for_state(proxy, "PAUSE", timeout=10) == "PAUSE"
        assert proxy.metric("kafka_quota_proxy_volume_missing_data", node_id=str(NODE)) == 1
        # each unanswered poll is logged with what ended it: a timeout, whose str() is empty, by its class
        unanswered = [r.getMessage() for r in caplog.records if "did not answer DescribeLogDirs" in r.getMessage()]
        assert unanswered and all(m.endswith(": TimeoutError") for m in unanswered), unanswered
        described = [h for h, _ in scripted.broker.requests if h.api_key == DESCRIBE_LOG_DIRS]
        assert described and all(h.api_version == 4 for h in described)
    finally:
        proxy.stop()
        scripted.broker.stop()
