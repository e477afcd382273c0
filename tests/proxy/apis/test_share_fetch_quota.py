"""Share consumers (KIP-932) under ``consumer_byte_rate``, on bytes: one connection core, this test as the broker.

A share consumer reads with ShareFetch, not Fetch. Its answers are charged to the client's ``consumer_byte_rate``
as a Fetch's are: ``max_bytes`` capped to the headroom, ``throttle_time_ms`` answered, the connection muted, so a
consumer that ignores the throttle and asks again at once is held; and to the topic quotas' ``consumer_byte_rate``.
Unlike a Fetch's, the answer is never trimmed: every record in it is acquired by the member, and one cut away could
not be acknowledged (it would stay locked until its lock timed out and then count as a failed delivery). Real
ShareFetch frames of every version, encoded by the codec.
"""

from __future__ import annotations

import uuid

import pytest

from config.loader import parse_config
from proxy.apis import ConnectionScope
from proxy.cluster.topics import Topics
from proxy.codec.apis import METADATA, SHARE_FETCH
from proxy.codec.header import (
    parse_request_header,
    response_header_length,
)
from proxy.codec.messages import (
    DECODED_APIS,
    decode_request,
    decode_response,
    new_response,
)
from proxy.enforcement.proxy_quotas import ProxyQuotas
from quota.primitives.clock import ManualClock
from tests.proxy.byte_rate_scopes import batch
from tests.proxy.core_wire import CoreWire

RATE = 1000  # bytes/s
NUM = 2  # quota.window.num: a fresh sensor's headroom is RATE * (NUM - 1) * 1 s
TOPIC, TOPIC_ID = "orders", uuid.UUID("0b0b0b0b-0000-4000-8000-000000000002")
BATCHES = [batch(5, 200, base_offset=5 * i) for i in range(3)]  # about 1.1 KB each: more than the headroom
VERSIONS = range(DECODED_APIS[SHARE_FETCH][0], DECODED_APIS[SHARE_FETCH][1] + 1)


class ShareWire(CoreWire):
    """A connection core between a share consumer and this test as the broker, which answers every ShareFetch with
    all three batches, acquired, whatever ``max_bytes`` says (KIP-74: a broker may return more)."""

    def __init__(self, quotas: list[dict], mode: str = "enforce", num: int = NUM) -> None:
        clock = ManualClock(1_000_000)
        settings = {"quota.window.num": num, "quota.window.size.seconds": 1, "quota.mode": mode}
        config = parse_config(
            {
                "upstream": {"bootstrap_servers": ["b:1"]},
                "listeners": [{"name": "L", "bind": "h:2"}],
                "quotas": quotas,
                "settings": settings,
            }
        )
        topics = Topics()
        metadata = new_response(METADATA, 12, topics=[{"name": TOPIC, "topic_id": TOPIC_ID, "partitions": [{}]}])
        topics.learn_from_metadata(metadata, clock.now_ms())  # as the consumer's own Metadata taught the proxy
        super().__init__(ConnectionScope(None, topics, ProxyQuotas(config, clock).home), clock)

    def share_fetch(self, version: int, corr: int) -> bytes:
        fields = {
            "group_id": "g",
            "member_id": "m-1",
            "share_session_epoch": 0 if corr == 1 else corr - 1,
            "max_wait_ms": 500,
            "min_bytes": 1,
            "max_bytes": 50 << 20,
            "topics": [
                {
                    "topic_id": TOPIC_ID,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "acknowledgement_batches": [{"first_offset": 0, "last_offset": 4, "acknowledge_types": [1]}]
                            if corr > 1
                            else [],
                        }
                    ],
                }
            ],
        }
        if version >= 1:
            fields |= {"max_records": 500, "batch_size": 500}
        return self.send(SHARE_FETCH, version, corr, "share-1", **fields)

    def answer_all(self, request: bytes) -> bytes:
        """Every batch, all acquired by the member, whatever ``max_bytes`` said."""
        partition = {
            "partition_index": 0,
            "records": b"".join(BATCHES),
            "acquired_records": [{"first_offset": 0, "last_offset": 14, "delivery_count": 1}],
        }
        return self.answer(
            request,
            acquisition_lock_timeout_ms=30_000 if parse_request_header(request, 1 << 20).api_version >= 1 else 0,
            responses=[{"topic_id": TOPIC_ID, "partitions": [partition]}],
        )

    def decoded_response(self, version: int):
        data = self.client_response()
        return decode_response(SHARE_FETCH, version, data[response_header_length(SHARE_FETCH, version, data) :])

    def row(self):
        return self.usage.row("L", "127.0.0.1", "ANONYMOUS", "share-1", SHARE_FETCH)


def _max_bytes(version: int, request: bytes) -> int:
    header = parse_request_header(request, 1 << 20)
    return decode_request(SHARE_FETCH, version, request[header.header_length :]).max_bytes


def _untouched(version: int, response) -> None:
    """Every acquired record reached the member: nothing trimmed."""
    (partition,) = response.responses[0].partitions
    assert bytes(partition.records) == b"".join(BATCHES)
    assert [(a.first_offset, a.last_offset) for a in partition.acquired_records] == [(0, 14)]


CLIENT_QUOTA = [{"entity": {"client-id": "share-1"}, "consumer_byte_rate": RATE}]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_share_fetch_is_capped_charged_throttled_and_muted_but_never_trimmed(version):
    wire = ShareWire(CLIENT_QUOTA)
    sent = wire.share_fetch(version, 1)
    forwarded = wire.broker_request()
    assert _max_bytes(version, forwarded) == RATE * (NUM - 1)  # capped to the headroom, as a Fetch's
    before, after = (
        decode_request(SHARE_FETCH, version, r[parse_request_header(r, 1 << 20).header_length :])
        for r in (sent, forwarded)
    )
    before.max_bytes = after.max_bytes
    assert after == before  # the rest as sent: topics, acknowledgements
    wire.answer_all(forwarded)
    response = wire.decoded_response(version)
    _untouched(version, response)
    assert response.throttle_time_ms > 0
    assert not wire.reading_client()  # muted
    assert wire.scope.quotas.fetch.stats_for("ANONYMOUS", "share-1").rate > 0
    assert wire.row().throttle_ms > 0


@pytest.mark.parametrize("version", VERSIONS)
def test_a_share_consumer_that_ignores_the_throttle_gets_its_quota_and_no_more(version):
    """Asking again the moment the proxy reads, from a broker that answers past ``max_bytes``, over 10 simulated
    minutes under Kafka's default 11 samples: about the quota, every record delivered whole."""
    wire = ShareWire(CLIENT_QUOTA, num=11)
    start, delivered = wire.clock.now_ms(), 0
    for corr in range(1, 201):
        while not wire.reading_client():  # its next request waits in its socket, unread: only time ends the mute
            deadline = wire.core.step(wire.now_ns()).deadline
            assert deadline is not None, "muted with no end"
            wire.clock.advance(max(1, deadline // 1_000_000 - wire.clock.now_ms()))
        wire.share_fetch(version, corr)  # at once, as soon as the proxy reads
        wire.answer_all(wire.broker_request())
        _untouched(version, wire.decoded_response(version))
        delivered += len(b"".join(BATCHES))
    ratio = delivered / ((wire.clock.now_ms() - start) / 1000) / RATE
    assert 0.9 <= ratio <= 1.1, ratio  # Kafka's throttle formula over 11 samples: 1.05 x here


@pytest.mark.parametrize("version", VERSIONS)
def test_in_shadow_mode_a_share_fetch_is_counted_and_nothing_else(version):
    wire = ShareWire(CLIENT_QUOTA, mode="shadow")
    sent = wire.share_fetch(version, 1)
    assert wire.broker_request() == sent  # not capped
    wire.answer_all(sent)
    response = wire.decoded_response(version)
    _untouched(version, response)
    assert response.throttle_time_ms == 0 and wire.reading_client()
    assert wire.scope.quotas.shadows.counts["consumer_byte_rate"][0] == 1
    assert wire.row().shadow_throttle_ms > 0


@pytest.mark.parametrize("version", VERSIONS)
def test_a_topics_consumer_byte_rate_charges_its_records_by_id_without_trimming(version):
    wire = ShareWire([{"entity": {"topic": TOPIC}, "consumer_byte_rate": RATE}])
    sent = wire.share_fetch(version, 1)
    assert wire.broker_request() == sent  # a topic quota leaves max_bytes alone, as for a Fetch
    wire.answer_all(sent)
    response = wire.decoded_response(version)
    _untouched(version, response)
    assert response.throttle_time_ms > 0 and not wire.reading_client()
    assert wire.row().topic_bytes == {TOPIC: len(b"".join(BATCHES))}
    assert wire.scope.quotas.topics.fetch.stats_for_topic(TOPIC).rate > 0


def test_a_share_fetch_without_a_consumer_quota_streams_untouched():
    wire = ShareWire([{"entity": {"client-id": "someone-else"}, "consumer_byte_rate": RATE}])
    sent = wire.share_fetch(1, 1)
    assert wire.broker_request() == sent
    answered = wire.answer_all(sent)
    assert bytes(wire.to_client) == answered and wire.reading_client()
