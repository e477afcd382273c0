"""The fault loop of tests/integration/test_faults.py against Apache Kafka: what Tansu cannot tell (its ListOffsets
"latest" answers below the true end; it keeps data in memory) Kafka does, with acks=all and the broker's own
offsets. A kafka-python producer (acks=all, no retries, no idempotence: each value sent at most once) writes about
200 values a second to a 3-partition topic through the sidecar proxy of kafka1's node, run as its own process, while
in turn the proxy is stopped with SIGTERM and started again, its broker connections are reset at once (a relay
between it and the broker's CLIENT listener), and it is killed with SIGKILL and started again. Then the topic is read
to its true end: every acknowledged value is at the offset Kafka acknowledged it at, none is there twice."""

from __future__ import annotations

import signal
import time

import pytest

from tests.harness import free_port, proxy_config
from tests.integration import clients as c
from tests.integration.faults import (
    SOAK_SECONDS,
    CutRelay,
    PacedProducer,
    ProxyProcess,
    inject_faults,
    judge_restarts,
    phase_seconds,
    wait_for_acks,
)
from tests.kafka_cluster import unique_topic

pytestmark = [pytest.mark.integration, pytest.mark.long_running(seconds=30)]


@pytest.mark.timeout(120 + 2 * SOAK_SECONDS)
def test_nothing_acknowledged_is_lost_or_duplicated_on_kafka_across_proxy_restarts_and_cuts(kafka1, tmp_path):
    node = kafka1.nodes[0]
    relay_port, ops_port = free_port(), free_port()
    relay = CutRelay(node.client_port, relay_port).start()
    config = proxy_config(node.proxy_port, relay_port, **{"shutdown.grace.period.ms": 3000})
    config["metrics"] = {"bind": f"127.0.0.1:{ops_port}"}  # the same port across restarts
    proxy = ProxyProcess(config, str(tmp_path / "proxy.yaml"), node.proxy_port)
    bootstrap = f"127.0.0.1:{node.proxy_port}"
    topic = unique_topic("faults")
    producer = PacedProducer(bootstrap, topic, "kafka-fault-producer")
    try:
        proxy.start()
        c.kp_create_topic(bootstrap, topic, 3)
        producer.start()
        assert wait_for_acks(producer, 0, 30) is not None, "traffic did not start"
        started = time.monotonic()
        faults, recoveries = inject_faults(proxy, relay, producer, phase_seconds(9))
        judge_restarts(producer, bootstrap, topic, started, faults, recoveries, "restarts_kafka")
    finally:
        producer.stopping.set()
        proxy.stop(signal.SIGKILL)
        relay.stop()
        c.kp_delete_topic(node.direct, topic)  # the shared cluster as the test found it
