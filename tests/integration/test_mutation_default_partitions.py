"""A CreateTopics v4 of ``num_partitions: -1`` is charged what the broker created (issue 23 item 6), against Tansu.

Tansu serves this path: it answers CreateTopics v4 with ``num_partitions: -1`` by creating its default (3
partitions), and its v4 answer carries no count, as Kafka's; its Metadata lists the topic, which is what the
proxy's own lookup (proxy.cluster.created_counts) reads. (Tansu does not answer DescribeConfigs for a BROKER
resource, it closes the connection, so the proxy does not learn the default that way.) A raw v4 request, since
the clients at hand do not send -1 in v4. ``controller_mutation_rate`` 0.01/s, 100 x 10 s windows (burst 10), so
the bucket barely refills while the test reads it.
"""

from __future__ import annotations

import pytest

from proxy.codec.apis import CREATE_TOPICS
from tests.harness import Tansu, free_port, proxy_config, proxy_in_front, wait_until
from tests.integration.raw import connect, exchange

pytestmark = pytest.mark.integration


def test_v4_minus_one_create_before_any_default_is_charged_what_tansu_created():
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    quotas = [{"entity": {"user": "<default>"}, "controller_mutation_rate": 0.01}]
    config = proxy_config(
        proxy_port,
        broker_port,
        quotas=quotas,
        **{"controller.quota.window.num": 100, "controller.quota.window.size.seconds": 10},
    )
    with proxy_in_front(broker, config) as proxy:

        def tokens():
            return proxy.metric("kafka_quota_proxy_controller_mutation_tokens", user="ANONYMOUS", client_id="")

        sock = connect(proxy.port)
        try:
            answer = exchange(
                sock,
                CREATE_TOPICS,
                4,
                topics=[
                    {"name": "dflt", "num_partitions": -1, "replication_factor": -1, "assignments": [], "configs": []}
                ],
                timeout_ms=5000,
                validate_only=False,
            )
        finally:
            sock.close()
        assert [(t.name, t.error_code) for t in answer.topics] == [("dflt", 0)]
        wait_until(lambda: tokens() <= 9, 10, "the partitions charged")  # the lookup runs after the answer
        assert 7 <= tokens() < 7.5  # 3 partitions charged (Tansu's default)
        # the default learnt (3): a second v4 create of -1 is charged it at admission, before any lookup, so three
        # topics (9 partitions) take the bucket below zero and the answer carries the throttle; with the default
        # unknown it would be admitted taking nothing, its answer unthrottled
        sock = connect(proxy.port)
        try:
            second = exchange(
                sock,
                CREATE_TOPICS,
                4,
                topics=[
                    {
                        "name": f"dflt-{i}",
                        "num_partitions": -1,
                        "replication_factor": -1,
                        "assignments": [],
                        "configs": [],
                    }
                    for i in range(3)
                ],
                timeout_ms=5000,
                validate_only=False,
            )
        finally:
            sock.close()
        assert [(t.name, t.error_code) for t in second.topics] == [(f"dflt-{i}", 0) for i in range(3)]
        assert second.throttle_time_ms > 0
        assert proxy.metric("kafka_quota_proxy_controller_mutation_partitions_unknown_total") == 0
