"""Produce refused during PAUSE (a volume at its hard limit), on bytes with a fake clock: the refusal is charged
and muted as an answered request is (issue 35), so a client retrying refused writes is held to its quota."""

from __future__ import annotations

import functools

import pytest

from config.loader import parse_config
from proxy.apis import AnswerLocally, ConnectionScope, Session, plan_request
from proxy.cluster.topics import Topics
from proxy.codec.apis import PRODUCE
from proxy.codec.error_codes import TOPIC_AUTHORIZATION_FAILED
from proxy.codec.header import encode_request_header, frame
from proxy.codec.messages import decode_response, encode_request, new_request
from proxy.codec.produce_prefix import parse_request_prefix
from proxy.enforcement.internal_topic_guard import InternalTopicGuard
from proxy.enforcement.proxy_quotas import ProxyQuotas
from quota.primitives.clock import ManualClock
from quota.primitives.decision import longest
from tests.proxy.internal_topic_plans import NobodyIsOwn

RATE = 1000  # bytes/s: the client's producer_byte_rate, and the volume's produce_base_rate for everyone else
SECONDS = 120


def paused_scope(clock) -> ConnectionScope:
    config = parse_config(
        {
            "upstream": {"bootstrap_servers": ["b:1"]},
            "listeners": [{"name": "L", "bind": "h:2"}],
            "quotas": [{"entity": {"client-id": "quoted"}, "producer_byte_rate": RATE}],
            "volume_usage": {"missing_data_action": "PAUSE", "produce_base_rate": RATE},
            "admin_principals": ["User:admin"],
        }
    )
    quotas = ProxyQuotas(config, clock)
    quotas.volume.brokers({1})  # a live broker without a snapshot: the fail-safe PAUSE
    assert quotas.volume.paused
    guard = InternalTopicGuard(quotas.internal_topics, config.admin_principals, own=NobodyIsOwn())
    return ConnectionScope(None, Topics(), quotas.home, guard=guard)


def produce(client_id: str, topic: str = "t") -> bytearray:
    msg = new_request(
        PRODUCE,
        9,
        acks=-1,
        timeout_ms=30000,
        topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": b"x" * 20_000}]}],
    )
    return bytearray(frame(encode_request_header(PRODUCE, 9, 1, client_id) + encode_request(PRODUCE, 9, msg)))


@pytest.mark.parametrize("client_id", ["quoted", "unquoted"])
def test_a_client_retrying_refused_writes_is_held_to_its_byte_rate(client_id):
    """A client that retries as soon as its mute ends sends at most about its rate in refused request bytes (its
    producer_byte_rate; the base rate when none applies). Before: one 20 kB request per pause_delay_ms (1 s), 20
    times the quota, whatever the quota."""
    clock = ManualClock(1_000_000)
    scope = paused_scope(clock)
    session = Session("L", "10.0.0.1")
    sent, throttles, start = 0, [], clock.now_ms()
    while clock.now_ms() - start < SECONDS * 1000:
        buf = produce(client_id)
        header = parse_request_prefix(buf, 1 << 30, scope.quotas.reads_produce_prefix)
        outcome = plan_request(scope, session, header).decide(memoryview(buf)[header.header_length :])
        assert isinstance(outcome, AnswerLocally)  # refused (NOT_ENOUGH_REPLICAS), never forwarded
        sent += len(buf)
        throttles.append(outcome.throttle)
        clock.advance(outcome.throttle.mute_ms)  # the mute is what holds a client that ignores throttle_time_ms
    assert all(t.throttle_time_ms >= 1000 and t.mute_ms >= 1000 for t in throttles)  # never below pause_delay_ms
    assert max(t.mute_ms for t in throttles) > 1000  # the byte rate's throttle, longer than the pause's
    assert scope.quotas.volume.refused_writes == {"Produce": len(throttles)}  # each counted
    burst = RATE * 10  # a fresh sensor's start-up burst (11 windows of 1 s)
    assert sent <= RATE * SECONDS + burst + len(buf) * 2


@pytest.mark.parametrize("client_id", ["quoted", "unquoted"])
def test_writes_naming_only_an_internal_topic_are_refused_charged_and_muted_alike(client_id):
    """Issue 44, N10: a tenant's Produce naming only the proxy's volume-usage topic went through the PAUSE check
    (the proxy's own writes must) and the internal-topic guard refused it uncharged: 13,352 refusals a second,
    2,718 times the quota. It is refused by the guard as before, and charged and muted as any refused produce."""
    clock = ManualClock(1_000_000)
    scope = paused_scope(clock)
    internal = next(iter(scope.quotas.internal_topics))
    session = Session("L", "10.0.0.1")
    sent, start = 0, clock.now_ms()
    while clock.now_ms() - start < SECONDS * 1000:
        buf = produce(client_id, internal)
        header = parse_request_prefix(buf, 1 << 30, scope.quotas.reads_produce_prefix)
        plan = plan_request(scope, session, header)
        outcome = plan.decide(memoryview(buf)[header.header_length :])
        assert isinstance(outcome, AnswerLocally)  # never forwarded
        response = decode_response(PRODUCE, 9, outcome.frame[9:])  # size, correlation id, tags
        assert response.responses[0].partition_responses[0].error_code == TOPIC_AUTHORIZATION_FAILED
        throttles = [t for t in (plan.throttle, outcome.throttle) if t is not None]
        assert throttles, "refused uncharged: no throttle, no mute"
        throttle = functools.reduce(longest, throttles)
        assert throttle.mute_ms >= 1000  # at least the pause's own delay
        sent += len(buf)
        clock.advance(throttle.mute_ms)
    burst = RATE * 10
    assert sent <= RATE * SECONDS + burst + len(buf) * 2
