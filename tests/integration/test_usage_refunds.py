"""A refund written straight to the usage topic gives a tenant nothing it did not spend (issue 44, T8).

Mutation usage is signed on the usage topic (KIP-599 refunds of topics the broker did not create), and a peer may
give back only what it charged. A sidecar (quota.scope cluster, in front of Tansu) whose tenant has
``controller_mutation_rate`` 1/s (a burst of 2) creates a 100-partition topic: admitted, its bucket 98 in debt, its
next create refused with THROTTLING_QUOTA_EXCEEDED. Someone writing the topic at the broker then sends a record
from a made-up peer giving back 1,000 tokens: it used to refill the bucket, and the next create was admitted (again
and again: 5 x the quota); now the refund is refused, counted in
``quota_peer_refunds_refused_total``, and the create is refused too. Counts, not timings.
"""

from __future__ import annotations

import socket
import uuid

import pytest

from proxy.codec.apis import CREATE_TOPICS
from proxy.codec.error_codes import NONE, THROTTLING_QUOTA_EXCEEDED
from proxy.codec.header import encode_request_header, frame, response_header_length
from proxy.codec.messages import decode_response, encode_request, new_request
from quota.sharing.usage_delta import UsageDelta
from quota.sharing.usage_encoding import encode
from tests.harness import Tansu, free_port, proxy_in_front, wait_until
from tests.integration.cluster_sidecars import USAGE_TOPIC, sidecar_config
from tests.integration.raw import produce_at_broker, read_frame

pytestmark = pytest.mark.integration


def create_topic(port: int, name: str, partitions: int) -> int:
    """CreateTopics v6 (strict) of one topic by the client id ``tenant``: the topic's error code."""
    msg = new_request(
        CREATE_TOPICS,
        6,
        timeout_ms=10000,
        validate_only=False,
        topics=[
            {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
        ],
    )
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(
            frame(encode_request_header(CREATE_TOPICS, 6, 1, "tenant") + encode_request(CREATE_TOPICS, 6, msg))
        )
        body = read_frame(sock)
    whole = len(body).to_bytes(4, "big") + body
    (topic,) = decode_response(CREATE_TOPICS, 6, whole[response_header_length(CREATE_TOPICS, 6, whole) :]).topics
    return topic.error_code


def test_a_forged_mutation_refund_on_the_usage_topic_gives_no_creates_back():
    port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"localhost:{port}").start()
    config = sidecar_config("127.0.0.1", port, broker_port, "cluster", "a")
    config["quotas"] = [{"entity": {"client-id": "tenant"}, "controller_mutation_rate": 1}]
    config["settings"].update({"controller.quota.window.num": 2, "controller.quota.window.size.seconds": 1})
    run = uuid.uuid4().hex[:6]
    with proxy_in_front(broker, config, "asyncio") as proxy:

        def received() -> float:
            return proxy.metric("kafka_quota_proxy_cluster_usage_records_total", direction="received")

        wait_until(
            lambda: proxy.metric("kafka_quota_proxy_cluster_usage_records_total", direction="sent") >= 2,
            20,
            "the sidecar publishing to the usage topic",
        )
        assert create_topic(port, f"big-{run}", 100) == NONE  # from the burst of 2: 98 in debt (98 s)
        assert create_topic(port, f"next-{run}", 1) == THROTTLING_QUOTA_EXCEEDED
        before = received()
        forged = UsageDelta("forger", mutations=(("", "tenant", -1000.0),))
        after = UsageDelta("forger", mutations=(("", "someone", 1.0),))  # read after the forged one is recorded
        produce_at_broker(broker_port, USAGE_TOPIC, [("forger", encode(forged)), ("forger", encode(after))])
        wait_until(lambda: received() >= before + 2, 20, "the forged records read and recorded")
        assert create_topic(port, f"after-{run}", 1) == THROTTLING_QUOTA_EXCEEDED  # admitted before: refilled
        refused = proxy.metric("kafka_quota_proxy_quota_peer_refunds_refused_total", quota="controller_mutation_rate")
        assert refused == 1  # the forged entry, counted
