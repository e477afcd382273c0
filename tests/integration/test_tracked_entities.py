"""``quota.max.tracked.entities`` past the byte-rate sensors (issue 35), through the proxy to Tansu: once the cap is
reached, new client ids share one ``<overflow>`` mutation bucket and new IPs one ``<overflow>`` connection rate, so
rotating names stops buying a fresh allowance each; the overflow is counted in
``quota_overflowed_records_total{quota}``. The cap is at its lowest (100) so the tests stay small; counts, not
timings, are asserted."""

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

pytestmark = pytest.mark.integration

CAP = 100
OVERFLOWED = "kafka_quota_proxy_quota_overflowed_records_total"


def create_topic(port: int, client_id: str, name: str) -> int:
    """CreateTopics v6 (strict: an over-quota topic is refused with THROTTLING_QUOTA_EXCEEDED) of one 1-partition
    topic, sent with ``client_id``: the topic's error code."""
    msg = new_request(CREATE_TOPICS, 6, timeout_ms=10000, validate_only=False, topics=[
        {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(frame(encode_request_header(CREATE_TOPICS, 6, 1, client_id) + encode_request(CREATE_TOPICS, 6, msg)))
        body = read_frame(sock)
    whole = len(body).to_bytes(4, "big") + body
    answer = decode_response(CREATE_TOPICS, 6, whole[response_header_length(CREATE_TOPICS, 6, whole):])
    (topic,) = answer.topics
    return topic.error_code


def test_rotating_client_ids_past_the_cap_share_one_mutation_burst():
    """1 mutation/s per client id, a burst of 2 (2 windows of 1 s). The first CAP client ids each create a topic on
    their own bucket; then 20 more, each a new id, create one each at once. Before, each had a full bucket of its
    own and all 20 were created; now they share the <overflow> bucket's burst."""
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    config = proxy_config(proxy_port, broker_port,
                          quotas=[{"entity": {"client-id": "<default>"}, "controller_mutation_rate": 1}],
                          **{"controller.quota.window.num": 2, "controller.quota.window.size.seconds": 1,
                             "quota.max.tracked.entities": CAP})
    run = uuid.uuid4().hex[:6]
    with proxy_in_front(broker, config) as proxy:
        tracked = [create_topic(proxy.port, f"tenant-{i}", f"t-{run}-{i}") for i in range(CAP)]
        assert tracked == [NONE] * CAP
        flood = [create_topic(proxy.port, f"flood-{i}", f"f-{run}-{i}") for i in range(20)]
        assert flood.count(NONE) <= 4, flood  # the <overflow> burst (2), and what refilled meanwhile
        assert flood.count(THROTTLING_QUOTA_EXCEEDED) >= 16
        assert proxy.metric(OVERFLOWED, quota="controller_mutation_rate") >= 20  # each look-up of a request counts
        assert create_topic(proxy.port, "tenant-3", f"again-{run}") == NONE  # tracked: its own bucket


def test_rotating_source_ips_past_the_cap_share_one_connection_rate():
    """``ip: <default>`` connection_creation_rate 1/s. CAP loopback addresses connect once each (their own rates);
    then 30 new addresses connect at once. Before, each new address had its own allowance and all 30 were served;
    now they share the <overflow> rate and all but a few are held and closed."""
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    config = proxy_config(proxy_port, broker_port,
                          quotas=[{"entity": {"ip": "<default>"}, "connection_creation_rate": 1}],
                          **{"quota.window.num": 2, "quota.window.size.seconds": 1, "quota.max.tracked.entities": CAP})
    with proxy_in_front(broker, config) as proxy:
        async def once_each(addresses):
            return await asyncio.gather(*(connect_once("127.0.0.1", proxy.port, ip, 10.0) for ip in addresses))

        tracked = asyncio.run(once_each([f"127.0.1.{i + 1}" for i in range(CAP)]))
        assert tracked.count("served") == CAP
        flood = asyncio.run(once_each([f"127.0.2.{i + 1}" for i in range(30)]))
        assert flood.count("served") <= 5, flood
        assert proxy.metric(OVERFLOWED, quota="connection_creation_rate") >= 30
