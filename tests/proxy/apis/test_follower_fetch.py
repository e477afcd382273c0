"""Follower fetches are exempt from consumer quotas (issue 23 item 1), on bytes: one connection core, this test as the
broker (a scripted one).

Tansu cannot act as a replica: it neither sends follower fetches nor answers one as a leader, so a broker replicating
through the proxy is played here. The fetches are real encoded Fetch requests, as a follower broker (replica id 1)
and a consumer (replica id -1) send them, on one connection under a tiny ``<default>`` user ``consumer_byte_rate``
that both fall under. A follower's Fetch reaches the broker byte for byte (its ``max_bytes`` not capped), its
response reaches the client byte for byte (not trimmed, ``throttle_time_ms`` 0), the connection is not muted, and
nothing is recorded against the user, in enforce and shadow mode; the consumer's Fetch after it is still capped to
the user's whole headroom (the follower's bytes took none of it), trimmed and throttled (enforce) or shadow-throttled.
"""

from __future__ import annotations

import uuid

import pytest

from config.loader import parse_config
from proxy.apis import ConnectionScope, Session
from proxy.cluster.topics import Topics
from proxy.codec.apis import FETCH, FETCH_REPLICA_STATE_SINCE
from proxy.codec.header import (
    parse_request_header,
    response_header_length,
)
from proxy.codec.messages import (
    decode_request,
    decode_response,
)
from proxy.enforcement.proxy_quotas import ProxyQuotas
from quota.primitives.clock import ManualClock
from tests.proxy.byte_rate_scopes import batch
from tests.proxy.core_wire import CoreWire

RATE = 100  # bytes/s for every user (<default>)
NUM = 2  # quota.window.num: a fresh sensor's headroom is RATE * (NUM - 1) * 1 s = 100 bytes
FOLLOWER, CONSUMER = "broker-1-fetcher-0", "consumer-1"
TOPIC_ID = uuid.uuid4()
BATCHES = [batch(5, 200, base_offset=5 * i) for i in range(3)]  # about 1.1 KB each: far over the headroom


class Wire(CoreWire):
    """A connection core between a fake client (a follower broker and a consumer on one connection) and this test as
    the leader broker."""

    def __init__(self, mode: str):
        clock = ManualClock(1_000_000)
        config = parse_config(
            {
                "upstream": {"bootstrap_servers": ["b:1"]},
                "listeners": [{"name": "L", "bind": "h:2"}],
                "quotas": [{"entity": {"user": "<default>"}, "consumer_byte_rate": RATE}],
                "settings": {"quota.window.num": NUM, "quota.window.size.seconds": 1, "quota.mode": mode},
            }
        )
        super().__init__(ConnectionScope(None, Topics(), ProxyQuotas(config, clock).home), clock)

    def fetch(self, version: int, corr: int, replica_id: int, client_id: str) -> bytes:
        """Send a Fetch as Kafka's encoder writes it (the replica id in ReplicaState's tagged field from v15)."""
        fields = {
            "max_wait_ms": 500,
            "min_bytes": 1,
            "max_bytes": 10 << 20,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": "orders",
                    "topic_id": TOPIC_ID,
                    "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
                }
            ],
        }
        if version >= FETCH_REPLICA_STATE_SINCE:
            fields["replica_state"] = {"replica_id": replica_id, "replica_epoch": 3 if replica_id >= 0 else -1}
        else:
            fields["replica_id"] = replica_id
        return self.send(FETCH, version, corr, client_id, **fields)

    def answer_all(self, request: bytes) -> bytes:
        """Answer as a broker that ignores max_bytes (as Tansu does): every batch, no throttle of its own."""
        partition = {"partition_index": 0, "high_watermark": 15, "records": b"".join(BATCHES)}
        return self.answer(request, responses=[{"topic": "orders", "topic_id": TOPIC_ID, "partitions": [partition]}])

    def row(self, client_id: str):
        return self.usage.row("L", "127.0.0.1", "ANONYMOUS", client_id, FETCH)


def decoded(version: int, response: bytes):
    return decode_response(FETCH, version, response[response_header_length(FETCH, version, response) :])


@pytest.mark.parametrize("version", [4, 12, 15, 17])
def test_a_follower_fetch_is_neither_capped_trimmed_counted_nor_throttled_and_a_consumers_still_is(version):
    wire = Wire("enforce")
    fetch = wire.scope.quotas.fetch

    sent = wire.fetch(version, 1, replica_id=1, client_id=FOLLOWER)
    assert wire.broker_request() == sent  # max_bytes 10 MiB, not capped to the 100-byte headroom
    answered = wire.answer_all(sent)
    assert wire.client_response() == answered  # every batch, throttle_time_ms 0
    assert wire.reading_client()  # not muted
    assert fetch.stats_for("ANONYMOUS", FOLLOWER) is None  # nothing recorded against the user
    assert wire.row(FOLLOWER).throttle_ms == 0 and wire.row(FOLLOWER).shadow_throttle_ms == 0

    # The consumer on the same connection, same user: today's rules, with the user's whole headroom left.
    wire.fetch(version, 2, replica_id=-1, client_id=CONSUMER)
    forwarded = wire.broker_request()
    header = parse_request_header(forwarded, 1 << 20)
    assert decode_request(FETCH, version, forwarded[header.header_length :]).max_bytes == RATE * (NUM - 1)
    wire.answer_all(forwarded)
    response = decoded(version, wire.client_response())
    assert bytes(response.responses[0].partitions[0].records) == BATCHES[0]  # trimmed to the first batch
    assert response.throttle_time_ms > 0
    assert not wire.reading_client()  # muted
    assert fetch.stats_for("ANONYMOUS", CONSUMER).rate > 0
    assert wire.row(CONSUMER).throttle_ms > 0


@pytest.mark.parametrize("version", [4, 12, 15, 17])
def test_in_shadow_mode_a_follower_fetch_is_not_counted_and_a_consumers_is(version):
    wire = Wire("shadow")
    quotas = wire.scope.quotas

    sent = wire.fetch(version, 1, replica_id=1, client_id=FOLLOWER)
    assert wire.broker_request() == sent
    answered = wire.answer_all(sent)
    assert wire.client_response() == answered
    assert wire.reading_client()
    assert quotas.fetch.stats_for("ANONYMOUS", FOLLOWER) is None
    assert not quotas.shadows.counts  # no "would throttle" for replication
    assert wire.row(FOLLOWER).shadow_throttle_ms == 0

    sent = wire.fetch(version, 2, replica_id=-1, client_id=CONSUMER)
    assert wire.broker_request() == sent  # shadow: nothing capped
    answered = wire.answer_all(sent)
    assert wire.client_response() == answered  # nor trimmed
    assert wire.reading_client()  # nor muted
    assert quotas.fetch.stats_for("ANONYMOUS", CONSUMER).rate > 0  # but counted
    assert quotas.shadows.counts["consumer_byte_rate"][0] == 1
    assert wire.row(CONSUMER).shadow_throttle_ms > 0


@pytest.mark.parametrize("version", [0, 2, 4, 12, 14])
def test_up_to_v14_a_follower_fetch_is_planned_as_if_no_quota_applied_so_both_ways_stream(version):
    from proxy.apis import PASS, plan_request
    from proxy.codec.header import RequestHeader

    scope = Wire("enforce").scope
    follower = RequestHeader(100, FETCH, version, 1, FOLLOWER, 30, replica_id=1)
    assert plan_request(scope, Session("L", "127.0.0.1"), follower) is PASS  # sidecar mode: nothing to rewrite
    consumer = RequestHeader(100, FETCH, version, 2, CONSUMER, 30)
    assert plan_request(scope, Session("L", "127.0.0.1"), consumer).leg.record_response is not None


@pytest.mark.parametrize("version", [15, 17])
def test_from_v15_one_plan_serves_a_clients_fetches_and_only_a_consumers_answer_is_charged(version):
    from proxy.apis import FORWARD_AS_IS, plan_request
    from proxy.codec.header import RequestHeader
    from proxy.codec.messages import encode_request, new_request

    scope, session = Wire("enforce").scope, Session("L", "127.0.0.1")
    plans = [plan_request(scope, session, RequestHeader(100, FETCH, version, n, CONSUMER, 30)) for n in (1, 2)]
    assert plans[0] is plans[1]  # made once for the client and version: it holds nothing of one request

    def body(replica_id: int) -> memoryview:
        state = {"replica_id": replica_id, "replica_epoch": 3 if replica_id >= 0 else -1}
        return memoryview(encode_request(FETCH, version, new_request(FETCH, version, replica_state=state)))

    for replica_id in (-1, 1, -1):  # a consumer's, a follower's, a consumer's again, on one connection
        outcome = plans[0].decide(body(replica_id))  # type: ignore[misc]
        if replica_id >= 0:
            assert outcome is FORWARD_AS_IS  # replication: its answer goes through no quota's leg
        else:
            assert outcome.leg.record_response is not None and outcome.leg.rewrite is not None
