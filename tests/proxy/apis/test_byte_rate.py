"""Byte-rate quota handling on bytes and values: throttle merging in every version, fetch trimming, and the
handlers' decisions with a fake clock."""

import pytest

from proxy.apis import Session, plan_request
from proxy.apis.byte_rate import trim_fetch_response
from proxy.codec.apis import FETCH, PRODUCE
from proxy.codec.frame import BUFFER, STREAM
from proxy.codec.header import RequestHeader
from proxy.codec.messages import (
    DECODED_APIS,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    new_request,
    new_response,
)
from proxy.codec.throttle import merge_throttle
from quota.primitives.clock import ManualClock
from quota.primitives.decision import Throttle
from tests.proxy.byte_rate_scopes import batch, proxy_quotas_with, scope_with


@pytest.mark.parametrize("version", range(DECODED_APIS[PRODUCE][0], DECODED_APIS[PRODUCE][1] + 1))
def test_merge_throttle_every_produce_version(version):
    body = encode_response(PRODUCE, version, new_response(PRODUCE, version, throttle_time_ms=100 if version else 0))
    merged = merge_throttle(PRODUCE, version, memoryview(body), 700)
    if version == 0:
        assert merged is None  # Produce v0 has no throttle_time_ms
        return
    assert decode_response(PRODUCE, version, merged).throttle_time_ms == 700
    assert merge_throttle(PRODUCE, version, memoryview(body), 50) is None  # the broker's longer throttle stands


@pytest.mark.parametrize("version", range(1, DECODED_APIS[FETCH][1] + 1))
def test_merge_throttle_every_fetch_version(version):
    records = batch(3)
    msg = new_response(
        FETCH, version, responses=[{"topic": "t", "partitions": [{"partition_index": 0, "records": records}]}]
    )
    merged = merge_throttle(FETCH, version, memoryview(encode_response(FETCH, version, msg)), 1234)
    out = decode_response(FETCH, version, merged)
    assert out.throttle_time_ms == 1234
    assert bytes(out.responses[0].partitions[0].records) == records


def fetch_body(version, partitions):
    msg = new_response(
        FETCH,
        version,
        responses=[
            {"topic": "t", "partitions": [{"partition_index": i, "records": r} for i, r in enumerate(partitions)]}
        ],
    )
    return encode_response(FETCH, version, msg)


def test_trim_cuts_at_batch_boundaries_and_keeps_the_first_batch():
    b1, b2, b3 = batch(5, base_offset=0), batch(5, base_offset=5), batch(5, base_offset=10)
    body = fetch_body(11, [b1 + b2, b3])
    out = decode_response(FETCH, 11, trim_fetch_response(11, memoryview(body), len(b1) + len(b2) + 10))
    assert bytes(out.responses[0].partitions[0].records) == b1 + b2
    assert bytes(out.responses[0].partitions[1].records) == b""
    tiny = decode_response(FETCH, 11, trim_fetch_response(11, memoryview(body), 1))
    assert bytes(tiny.responses[0].partitions[0].records) == b1  # progress: the first batch always goes
    assert trim_fetch_response(11, memoryview(body), 10**9) is None


def test_trim_keeps_a_partial_tail_out():
    b1, b2 = batch(5), batch(5, base_offset=5)
    body = fetch_body(12, [b1 + b2[:30]])  # the broker cut the last batch at max_bytes: legal
    out = decode_response(FETCH, 12, trim_fetch_response(12, memoryview(body), len(b1)))
    assert bytes(out.responses[0].partitions[0].records) == b1


def produce_header(size, client_id="p", version=9, corr=1):
    return RequestHeader(size, PRODUCE, version, corr, client_id, 20, 1)


def test_produce_is_throttled_after_the_startup_burst_and_the_mute_is_capped():
    clock = ManualClock(1_000_000)
    scope = scope_with(
        [{"entity": {"client-id": "p"}, "producer_byte_rate": 1000}],
        clock,
        **{"quota.window.num": 11, "quota.mute.max.ms": 3000},
    )
    session = Session("L", "127.0.0.1")
    burst = 1000 * 10  # quota * (num - 1) * window: a fresh sensor takes this before throttling
    assert plan_request(scope, session, produce_header(burst)).throttle is None
    plan = plan_request(scope, session, produce_header(5000))
    assert isinstance(plan.throttle, Throttle)
    assert plan.throttle.throttle_time_ms == 3000  # (15000 B / 10 s - 1000) / 1000 * 10 s = 5000, capped at 3000
    other = plan_request(scope, session, produce_header(10**6, client_id="someone-else"))
    assert other.throttle is None  # another entity, no quota


def test_fetch_under_quota_is_buffered_capped_and_recorded_from_the_response():
    clock = ManualClock(1_000_000)
    scope = scope_with([{"entity": {"client-id": "c"}, "consumer_byte_rate": 1000}], clock, **{"quota.window.num": 3})
    session = Session("L", "127.0.0.1")
    header = RequestHeader(100, FETCH, 12, 1, "c", 20)
    plan = plan_request(scope, session, header)
    assert plan.action is BUFFER
    request = encode_request(FETCH, 12, new_request(FETCH, 12, max_bytes=50 * 1024 * 1024))
    capped = decode_request(FETCH, 12, plan.decide(memoryview(request)).body)
    assert capped.max_bytes == 1000 * 2  # the headroom of a fresh sensor: quota * (num - 1) * window
    assert plan.leg.record_response(1500).__class__.__name__ == "Forward"
    throttled = plan.leg.record_response(1500)
    assert isinstance(throttled, Throttle) and throttled.throttle_time_ms > 0
    unlimited = plan_request(scope, session, RequestHeader(100, FETCH, 12, 2, "free", 20))
    assert unlimited.action is STREAM and unlimited.leg.record_response is None


def test_two_fetches_capped_to_one_headroom_are_cut_to_what_is_left_when_each_answer_comes():
    # two members of a group under one quota, their fetches in flight at once: each capped to the same headroom;
    # the second answer is cut to what the first left (its first batch kept), not to the headroom of its request
    clock = ManualClock(1_000_000)
    scope = scope_with([{"entity": {"client-id": "c"}, "consumer_byte_rate": 1000}], clock, **{"quota.window.num": 3})
    session = Session("L", "127.0.0.1")
    request = encode_request(FETCH, 12, new_request(FETCH, 12, max_bytes=50 * 1024 * 1024))
    plans = [plan_request(scope, session, RequestHeader(100, FETCH, 12, n, "c", 20)) for n in (1, 2)]
    for plan in plans:
        assert decode_request(FETCH, 12, plan.decide(memoryview(request)).body).max_bytes == 2000
    records = batch(3)
    answer = fetch_body(12, [records] * 3)  # about 1,100 bytes: within 2,000, over what the first leaves
    first, _ = plans[0].leg.run(memoryview(answer), lambda rewritten: len(answer), None)
    assert first is None  # within the headroom: as the broker sent it, charged whole
    second, _ = plans[1].leg.run(memoryview(answer), lambda rewritten: len(rewritten or answer), None)
    kept = decode_response(FETCH, 12, second).responses[0].partitions
    assert [bytes(p.records) for p in kept] == [records, b"", b""]


def test_scrapes_are_bounded_whatever_the_number_of_clients():
    """2,000 client ids under a <default> quota and a cap of 10 entities: 9 busiest series plus __other__, whose
    bytes are the rest's sum (and which has no rate sample: it would cost a measurement per client)."""
    from proxy.ops.quota_metrics import QuotaMetricsCollector

    clock = ManualClock(1_000_000)
    quotas = proxy_quotas_with(
        [{"entity": {"client-id": "<default>"}, "producer_byte_rate": 1e9}], clock, **{"quota.metrics.max.entities": 10}
    )
    for i in range(2000):
        quotas.home.produce.record_and_decide("u", f"client-{i}", 1000 + i)
    families = {f.name: f for f in QuotaMetricsCollector(quotas).collect()}
    recorded = families["kafka_quota_proxy_quota_bytes"].samples
    assert len([s for s in recorded if s.name.endswith("_total")]) == 10
    by_client = {s.labels["client_id"]: s.value for s in recorded if s.name.endswith("_total")}
    assert by_client["client-1999"] == 2999
    assert by_client["__other__"] == sum(1000 + i for i in range(1991))
    rates = families["kafka_quota_proxy_quota_byte_rate"].samples
    assert len(rates) == 9 and "__other__" not in {s.labels["client_id"] for s in rates}
