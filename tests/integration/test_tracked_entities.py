"""``quota.max.tracked.entities`` past the byte-rate sensors, through the proxy to Tansu: once the cap is reached, a
new client id still gets a mutation bucket of its own and a new IP a connection rate of its own (an unused entity is
evicted to make room, counted in ``quota_overflowed_records_total{quota}``), but it starts at its limit, without
Kafka's fresh-entity burst: rotating names past the cap buys one create or one connection per name, where below the
cap each new name gets a whole burst (as on a Kafka broker). The cap is at its lowest (100) so the tests stay small;
counts, not timings, are asserted. How a well-behaved newcomer fares while the table is flooded:
test_full_tables.py."""

from __future__ import annotations

import asyncio
import socket
import uuid

import pytest

from demo.storms import connect_once
from proxy.codec.apis import CREATE_TOPICS
from proxy.codec.error_codes import NONE, THROTTLING_QUOTA_EXCEEDED
from proxy.codec.header import encode_request_header, frame, response_header_length
from proxy.codec.messages import decode_response, encode_request, new_request
from tests.harness import Tansu, free_port, proxy_config, proxy_in_front
from tests.integration.raw import read_frame

# real time: a rotating name's second request must come within its rate's window of its first
pytestmark = [pytest.mark.integration, pytest.mark.measures_rate]

CAP = 100
OVERFLOWED = "kafka_quota_proxy_quota_overflowed_records_total"


def create_topic(port: int, client_id: str, name: str) -> int:
    """CreateTopics v6 (strict: an over-quota topic is refused with THROTTLING_QUOTA_EXCEEDED) of one 1-partition
    topic, sent with ``client_id``: the topic's error code."""
    msg = new_request(
        CREATE_TOPICS,
        6,
        timeout_ms=10000,
        validate_only=False,
        topics=[{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
    )
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(
            frame(encode_request_header(CREATE_TOPICS, 6, 1, client_id) + encode_request(CREATE_TOPICS, 6, msg))
        )
        body = read_frame(sock)
    whole = len(body).to_bytes(4, "big") + body
    answer = decode_response(CREATE_TOPICS, 6, whole[response_header_length(CREATE_TOPICS, 6, whole) :])
    (topic,) = answer.topics
    return topic.error_code


def test_rotating_client_ids_past_the_cap_get_no_fresh_mutation_burst():
    """1 mutation/s per client id, a burst of 2 (2 windows of 1 s). The first CAP client ids each create two topics at
    once on their own full bucket: both created (Kafka's fresh burst). Then 20 more, each a new id, do the same: the
    first topic of each is created (its own bucket, starting empty: KIP-599 admits while it is not negative), the
    second refused with THROTTLING_QUOTA_EXCEEDED, so a rotating name gains one create, not a burst."""
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    config = proxy_config(
        proxy_port,
        broker_port,
        quotas=[{"entity": {"client-id": "<default>"}, "controller_mutation_rate": 1}],
        **{
            "controller.quota.window.num": 2,
            "controller.quota.window.size.seconds": 1,
            "quota.max.tracked.entities": CAP,
        },
    )
    run = uuid.uuid4().hex[:6]
    with proxy_in_front(broker, config) as proxy:
        tracked = [create_topic(proxy.port, f"tenant-{i}", f"t-{run}-{i}-{k}") for i in range(CAP) for k in range(2)]
        assert tracked == [NONE] * (2 * CAP)
        flood = [[create_topic(proxy.port, f"flood-{i}", f"f-{run}-{i}-{k}") for k in range(2)] for i in range(20)]
        assert [first for first, _ in flood] == [NONE] * 20, flood  # a newcomer is served on its own bucket
        assert [second for _, second in flood].count(THROTTLING_QUOTA_EXCEEDED) >= 18, flood  # no fresh burst
        assert proxy.metric(OVERFLOWED, quota="controller_mutation_rate") >= 20  # an unused entity evicted for each


def test_rotating_source_ips_past_the_cap_get_no_fresh_connection_burst():
    """``ip: <default>`` connection_creation_rate 1/s over 2 windows. CAP loopback addresses connect twice each,
    back to back, on their own fresh rates: the first served, the second held and closed (at 1/s a fresh address's
    allowance is one connection at once). Then 30 new addresses do the same past the cap: each gets exactly that and
    no more (its own rate, starting at its limit less one connection): a rotating address gains one connection, as
    below the cap, and the shared <overflow> rate that used to refuse newcomers altogether is gone."""
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    config = proxy_config(
        proxy_port,
        broker_port,
        quotas=[{"entity": {"ip": "<default>"}, "connection_creation_rate": 1}],
        **{"quota.window.num": 2, "quota.window.size.seconds": 1, "quota.max.tracked.entities": CAP},
    )
    with proxy_in_front(broker, config) as proxy:

        async def twice_each(addresses):
            async def twice(ip):
                return [await connect_once("127.0.0.1", proxy.port, ip, 10.0) for _ in range(2)]

            return await asyncio.gather(*(twice(ip) for ip in addresses))

        tracked = asyncio.run(twice_each([f"127.0.1.{i + 1}" for i in range(CAP)]))
        assert [first for first, _ in tracked] == ["served"] * CAP
        assert [second for _, second in tracked].count("served") <= 3, tracked  # what refilled meanwhile, at most
        flood = asyncio.run(twice_each([f"127.0.2.{i + 1}" for i in range(30)]))
        assert [first for first, _ in flood] == ["served"] * 30, flood
        assert [second for _, second in flood].count("served") <= 3, flood  # what refilled meanwhile, at most
        assert proxy.metric(OVERFLOWED, quota="connection_creation_rate") >= 30
