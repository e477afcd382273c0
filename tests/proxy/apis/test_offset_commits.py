"""OffsetCommit and TxnOffsetCommit (proxy.apis.offset_commits): metadata over offset.metadata.max.bytes answered
OFFSET_METADATA_TOO_LARGE by the proxy, the rest forwarded and the answers merged; the bytes charged against
producer_byte_rate; at PAUSE no metadata at all. Pure: bytes in, values out, a fake clock."""

from __future__ import annotations

import uuid

import pytest

from config.loader import parse_config
from proxy.apis import AnswerLocally, ConnectionScope, ForwardRequest, Session, plan_request
from proxy.apis.plan import PASS
from proxy.cluster.topics import Topics
from proxy.codec.apis import OFFSET_COMMIT, TXN_OFFSET_COMMIT
from proxy.codec.error_codes import OFFSET_METADATA_TOO_LARGE
from proxy.codec.header import encode_request_header, frame, parse_request_header
from proxy.codec.messages import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    new_request,
    new_response,
)
from proxy.enforcement.proxy_quotas import ProxyQuotas
from quota.primitives.clock import ManualClock

TENANT = Session("L", "10.0.0.9")
IDS = {name: uuid.uuid5(uuid.NAMESPACE_DNS, name) for name in "abc"}
NAMES = {topic_id: name for name, topic_id in IDS.items()}


def name(topic) -> str:
    return topic.name or NAMES[topic.topic_id]


def scope_for(*, paused: bool = False, rate: int | None = None) -> ConnectionScope:
    raw = {"upstream": {"bootstrap_servers": ["b:1"]}, "listeners": [{"name": "L", "bind": "h:2"}]}
    if rate is not None:
        raw["quotas"] = [{"entity": {"client-id": "committer"}, "producer_byte_rate": rate}]
    if paused:
        raw["volume_usage"] = {"missing_data_action": "PAUSE", "produce_base_rate": 1000}
    quotas = ProxyQuotas(parse_config(raw), ManualClock(1_000_000))
    if paused:
        quotas.volume.brokers({1})  # a broker without a snapshot: the fail-safe PAUSE
        assert quotas.volume.paused
    return ConnectionScope(None, Topics(), quotas.home)


def commit(api_key: int, version: int, metadata: dict[tuple[str, int], str | None]):
    topics: dict[str, list] = {}
    for (topic, partition), meta in metadata.items():
        topics.setdefault(topic, []).append(
            {"partition_index": partition, "committed_offset": 42, "committed_metadata": meta}
        )
    fields = {"group_id": "g", "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
    if api_key == OFFSET_COMMIT and version >= 10:  # topics by id alone (KIP-848)
        fields["topics"] = [{"topic_id": IDS[t["name"]], "partitions": t["partitions"]} for t in fields["topics"]]
    if api_key == TXN_OFFSET_COMMIT:
        fields.update(transactional_id="tx", producer_id=7, producer_epoch=0)
    return new_request(api_key, version, **fields)


def planned(scope, api_key, version, msg, client_id="committer"):
    buf = frame(encode_request_header(api_key, version, 5, client_id) + encode_request(api_key, version, msg))
    header = parse_request_header(memoryview(buf), 1 << 30)
    return plan_request(scope, TENANT, header), memoryview(buf)[header.header_length :]


@pytest.mark.parametrize(
    "api_key,version",
    [(OFFSET_COMMIT, 2), (OFFSET_COMMIT, 8), (OFFSET_COMMIT, 10), (TXN_OFFSET_COMMIT, 0), (TXN_OFFSET_COMMIT, 5)],
)
def test_metadata_over_the_cap_is_refused_per_partition_and_the_answers_merged(api_key, version):
    scope = scope_for()
    plan, body = planned(
        scope,
        api_key,
        version,
        commit(api_key, version, {("a", 0): "x" * 4097, ("a", 1): "ok", ("b", 0): "y" * 5000, ("c", 0): None}),
    )
    outcome = plan.decide(body)
    assert isinstance(outcome, ForwardRequest)
    forwarded = decode_request(api_key, version, outcome.body)
    assert [(name(t), [p.partition_index for p in t.partitions]) for t in forwarded.topics] == [("a", [1]), ("c", [0])]
    broker = new_response(
        api_key,
        version,
        topics=[
            {
                "name": t.name,
                **({"topic_id": t.topic_id} if api_key == OFFSET_COMMIT else {}),
                "partitions": [{"partition_index": p.partition_index} for p in t.partitions],
            }
            for t in forwarded.topics
        ],
    )
    merged = decode_response(
        api_key, version, outcome.leg.rewrite(memoryview(encode_response(api_key, version, broker)))
    )
    assert sorted((name(t), p.partition_index, p.error_code) for t in merged.topics for p in t.partitions) == [
        ("a", 0, OFFSET_METADATA_TOO_LARGE),
        ("a", 1, 0),
        ("b", 0, OFFSET_METADATA_TOO_LARGE),
        ("c", 0, 0),
    ]


def test_a_commit_all_over_the_cap_never_reaches_the_broker_and_a_small_one_is_not_decoded():
    scope = scope_for()
    plan, body = planned(scope, OFFSET_COMMIT, 8, commit(OFFSET_COMMIT, 8, {("a", 0): "x" * 4097}))
    outcome = plan.decide(body)
    assert isinstance(outcome, AnswerLocally)
    answer = decode_response(OFFSET_COMMIT, 8, outcome.frame[9:])
    assert [p.error_code for t in answer.topics for p in t.partitions] == [OFFSET_METADATA_TOO_LARGE]
    plan, _ = planned(scope, OFFSET_COMMIT, 8, commit(OFFSET_COMMIT, 8, {("a", p): "" for p in range(10)}))
    assert plan is PASS  # under the cap whole: streamed, and no quota applies


def test_commits_are_charged_against_producer_byte_rate():
    scope = scope_for(rate=1000)
    msg = commit(OFFSET_COMMIT, 8, {("a", p): "m" * 100 for p in range(50)})  # about 5.7 kB a request
    throttles = [planned(scope, OFFSET_COMMIT, 8, msg)[0].throttle for _ in range(3)]
    assert throttles[0] is None or throttles[0].throttle_time_ms == 0
    assert throttles[-1] is not None and throttles[-1].throttle_time_ms > 0  # over 1000 B/s: throttled
    plan, _ = planned(scope, OFFSET_COMMIT, 8, msg, client_id="unquoted")
    assert plan.throttle is None  # no quota applies to it, as with a Produce


def test_at_pause_offsets_are_committed_without_metadata_and_charged_to_the_base_rate():
    scope = scope_for(paused=True)
    plan, body = planned(
        scope,
        OFFSET_COMMIT,
        8,
        commit(OFFSET_COMMIT, 8, {("a", 0): "", ("a", 1): "z", ("a", 2): None}),
        client_id="unquoted",
    )
    outcome = plan.decide(body)
    forwarded = decode_request(OFFSET_COMMIT, 8, outcome.body)
    assert [p.partition_index for t in forwarded.topics for p in t.partitions] == [0, 2]  # "z": refused
    big = commit(OFFSET_COMMIT, 8, {("a", p): None for p in range(200)})
    throttles = [planned(scope, OFFSET_COMMIT, 8, big, client_id="unquoted")[0].throttle for _ in range(5)]
    assert throttles[-1] is not None and throttles[-1].throttle_time_ms > 0  # produce_base_rate 1000 B/s
