"""The Produce handler under the producer-id quota (issue 23 item 3), on bytes with a fake clock: what the plan does
with a Produce that brings a new producer id (forward, hold it on the connection's own deadline, answer locally with
a retriable error), and that a refused id is not remembered by the connection."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from proxy.apis import AnswerLocally, ForwardRequest, HoldFor, Session, plan_request
from proxy.codec.apis import PRODUCE
from proxy.codec.error_codes import NOT_ENOUGH_REPLICAS
from proxy.codec.frame import BUFFER
from proxy.codec.header import encode_request_header, frame, response_header_length
from proxy.codec.messages import decode_response, encode_request, new_request, new_response
from proxy.codec.produce_prefix import parse_request_prefix
from proxy.codec.responses import encode_local_response
from quota.primitives.clock import ManualClock
from quota.primitives.decision import Throttle
from tests.proxy.byte_rate_scopes import scope_with

QUOTA = [{"entity": {"user": "<default>"}, "producer_ids_rate": 2}]
SETTINGS = {
    "producer.id.quota.window.num": 1,
    "producer.id.quota.window.size.seconds": 10,
    "producer.id.quota.max.hold.ms": 6_000,
    "quota.mute.max.ms": 25_000,
}  # burst 2, a token every 5 s


def produce(pid: int, version: int = 9, corr: int = 1) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
        batch_size=1 << 20,
    )
    builder.append(0, timestamp=0, key=None, value=b"v", headers=[])
    records = bytes(builder.build())
    msg = new_request(
        PRODUCE,
        version,
        acks=-1,
        timeout_ms=30000,
        topic_data=[{"name": "t", "partition_data": [{"index": 0, "records": records}]}],
    )
    return bytearray(frame(encode_request_header(PRODUCE, version, corr, "p") + encode_request(PRODUCE, version, msg)))


def plan_for(scope, session, buf):
    header = parse_request_prefix(buf, 1 << 30, scope.quotas.reads_produce_prefix)
    return header, plan_request(scope, session, header)


@pytest.fixture
def hold():
    clock = ManualClock(1_000_000)
    return scope_with(QUOTA, clock, **SETTINGS), clock


def test_a_new_id_over_quota_is_read_whole_and_held_on_a_timer_then_forwarded_as_it_is(hold):
    scope, clock = hold
    for pid in (1, 2):  # the burst: streamed as ever
        _, plan = plan_for(scope, Session("L", "10.0.0.1"), produce(pid))
        assert plan.action is not BUFFER and plan.decide is None
    buf = produce(3)
    header, plan = plan_for(scope, Session("L", "10.0.0.1"), buf)
    assert plan.action is BUFFER and plan.throttle is None
    clock.advance(4_990)  # the body is complete 4.99 s later: the hold's time is the quota's, 10 ms are left
    outcome = plan.decide(memoryview(buf)[header.header_length :])
    assert isinstance(outcome, HoldFor) and outcome.delay_ms == 10
    assert outcome.then() == ForwardRequest()  # the request as it came, nothing rewritten


def test_past_the_bound_the_produce_is_answered_with_not_enough_replicas_and_a_throttle(hold):
    scope, clock = hold
    session = Session("L", "10.0.0.1")
    for pid in (1, 2, 3):  # 3 is held 5 s
        plan_for(scope, Session("L", "10.0.0.1"), produce(pid))
    buf = produce(4, version=9, corr=42)
    header, plan = plan_for(scope, session, buf)  # 10 s away, past the 6 s bound
    outcome = plan.decide(memoryview(buf)[header.header_length :])
    assert isinstance(outcome, AnswerLocally)
    assert outcome.throttle == Throttle(4_000, 4_000)  # a retry in 4 s is held 6 s
    body = outcome.frame[4:]
    response = decode_response(PRODUCE, 9, body[response_header_length(PRODUCE, 9, outcome.frame) - 4 :])
    assert [(t.name, p.index, p.error_code) for t in response.responses for p in t.partition_responses] == [
        ("t", 0, NOT_ENOUGH_REPLICAS)
    ]
    assert response.throttle_time_ms == 4_000
    assert session.producer_id != 4  # not remembered: the retry on this connection is judged again
    _, again = plan_for(scope, session, produce(4))
    assert again.action is BUFFER  # judged again: refused again (still 10 s away)
    assert scope.quotas.producer_ids.stats(clock.now_ms())[0].new_pids_total == 3


def test_a_known_id_on_its_connection_and_another_users_new_id_are_streamed(hold):
    scope, _ = hold
    alice = Session("L", "10.0.0.1", user="alice")
    for pid in (1, 2):
        plan_for(scope, alice, produce(pid))
    _, known = plan_for(scope, alice, produce(2))
    assert known.action is not BUFFER and known.decide is None
    _, elsewhere = plan_for(scope, Session("L", "10.0.0.9", user="alice"), produce(1))  # known, new connection
    assert elsewhere.action is not BUFFER
    _, bob = plan_for(scope, Session("L", "10.0.0.2", user="bob"), produce(77))
    assert bob.action is not BUFFER and bob.decide is None


def test_throttle_enforcement_forwards_and_throttles_as_the_kip_does():
    scope = scope_with(QUOTA, ManualClock(1_000_000), **{**SETTINGS, "producer.id.quota.enforcement": "throttle"})
    for pid in (1, 2):
        plan_for(scope, Session("L", "10.0.0.1"), produce(pid))
    _, plan = plan_for(scope, Session("L", "10.0.0.1"), produce(3))
    assert plan.action is not BUFFER and plan.throttle == Throttle(5_000, 5_000)


class HeldConnection:
    """A connection core on the fake clock: a held Produce is the flow's, ended by its deadline (:meth:`step`)."""

    def __init__(self, scope, clock):
        from proxy.connection.core import ConnectionCore
        from tests.fakes import NULL_API_METRICS

        self.to_broker = bytearray()
        self.clock = clock
        self.core = ConnectionCore(
            scope,
            Session("L", "10.0.0.1"),
            max_request_bytes=1 << 20,
            max_response_bytes=1 << 20,
            max_inflight=10,
            write_client=lambda data: None,
            write_broker=self.to_broker.extend,
            clock=lambda: clock.now_ms() * 1_000_000,
            api_metrics=lambda key: NULL_API_METRICS,
        )

    def send(self, buf):
        self.core.client_bytes(memoryview(buf))
        return self.step()

    def step(self):
        return self.core.step(self.clock.now_ms() * 1_000_000)


def test_a_held_produce_whose_client_goes_is_never_forwarded_and_its_token_goes_back(hold):
    """The client closes while its Produce is held: the hold is released (token back, id unknown), and when the
    timer ends nothing is written to the broker. While held, the client is still read (once, bounded) so that its
    close is seen at all: a paused socket reports no end."""
    scope, clock = hold
    quota = scope.quotas.producer_ids
    conn = HeldConnection(scope, clock)
    for pid in (1, 2):
        conn.send(produce(pid, corr=pid))
    forwarded = len(conn.to_broker)
    state = conn.send(produce(3, corr=3))
    assert conn.core.flow.held == 1 and state.deadline == (clock.now_ms() + 5_000) * 1_000_000
    assert state.reading_client  # watched while held
    assert len(conn.to_broker) == forwarded and quota.stats(clock.now_ms())[0].tokens == -1
    conn.core.requests.client_gone()  # the socket saw the end (eof_received, or connection_lost via close)
    (stats,) = quota.stats(clock.now_ms())
    assert stats.abandoned_count == 1 and stats.tokens == 0
    assert conn.core.flow.held == 0  # the hold left the flow with its client
    clock.advance(5_000)
    conn.step()  # its time would have come
    assert len(conn.to_broker) == forwarded  # dropped: the broker never sees id 3


def test_a_held_produce_forwarded_when_its_time_comes_is_not_released_when_the_client_goes_later(hold):
    scope, clock = hold
    conn = HeldConnection(scope, clock)
    for pid in (1, 2):
        conn.send(produce(pid, corr=pid))
    forwarded = len(conn.to_broker)
    conn.send(produce(3, corr=3))
    clock.advance(4_999)
    conn.step()
    assert len(conn.to_broker) == forwarded and conn.core.flow.held == 1  # not yet
    clock.advance(1)
    conn.step()  # the flow's deadline: the hold ends
    assert len(conn.to_broker) > forwarded and conn.core.flow.held == 0
    conn.core.close()
    assert scope.quotas.producer_ids.stats(clock.now_ms())[0].abandoned_count == 0


def produce_batches(*partitions: tuple[int, ...], version: int = 9, corr: int = 1) -> bytearray:
    """A Produce of one partition per tuple, each holding a batch per producer id of its tuple (-1: none)."""

    def batch(pid: int) -> bytes:
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=0,
            is_transactional=False,
            producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1,
            base_sequence=0 if pid >= 0 else -1,
            batch_size=1 << 20,
        )
        builder.append(0, timestamp=0, key=None, value=b"v", headers=[])
        return bytes(builder.build())

    msg = new_request(
        PRODUCE,
        version,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            {
                "name": "t",
                "partition_data": [
                    {"index": i, "records": b"".join(batch(pid) for pid in pids)} for i, pids in enumerate(partitions)
                ],
            }
        ],
    )
    return bytearray(frame(encode_request_header(PRODUCE, version, corr, "p") + encode_request(PRODUCE, version, msg)))


def test_a_new_id_in_the_second_batch_is_counted_and_held(hold):
    """Issue 35: the first batch has no producer id, the second brings a new one; past the burst it is held."""
    scope, clock = hold
    for pid in (1, 2):  # the burst, each new id in a second batch
        _, plan = plan_for(scope, Session("L", "10.0.0.1"), produce_batches((-1, pid)))
        assert plan.action is not BUFFER
    assert scope.quotas.producer_ids.stats(clock.now_ms())[0].new_pids_total == 2
    buf = produce_batches((-1, 3))
    header, plan = plan_for(scope, Session("L", "10.0.0.1"), buf)
    assert header.producer_ids == (3,) and plan.action is BUFFER
    assert isinstance(plan.decide(memoryview(buf)[header.header_length :]), HoldFor)
    assert scope.quotas.producer_ids.stats(clock.now_ms())[0].new_pids_total == 3


def test_new_ids_in_several_partitions_are_all_counted_and_past_the_bound_refused_none_kept(hold):
    scope, clock = hold
    quota = scope.quotas.producer_ids
    _, plan = plan_for(scope, Session("L", "10.0.0.1"), produce_batches((-1, 1), (2, 2), (-1,)))
    assert plan.action is not BUFFER and quota.stats(clock.now_ms())[0].new_pids_total == 2
    buf = produce_batches(*((-1, pid) for pid in range(100, 500)), corr=7)  # issue 35's 400 new ids at once
    header, plan = plan_for(scope, Session("L", "10.0.0.1"), buf)
    outcome = plan.decide(memoryview(buf)[header.header_length :])
    assert isinstance(outcome, AnswerLocally)  # refused: never forwarded
    assert quota.stats(clock.now_ms())[0].new_pids_total == 2  # and none of the 400 counted or remembered


def test_a_held_request_with_several_new_ids_whose_client_goes_gives_every_token_back(hold):
    scope, clock = hold
    quota = scope.quotas.producer_ids
    conn = HeldConnection(scope, clock)
    conn.send(produce_batches((-1,), (-1, 1), corr=1))  # one of the burst's two tokens
    forwarded = len(conn.to_broker)
    conn.send(produce_batches((-1, 3), (4, 3), corr=2))  # 3 and 4 take the other and the next: held 5 s
    assert conn.core.flow.held == 1 and len(conn.to_broker) == forwarded
    assert quota.stats(clock.now_ms())[0].tokens == -1
    conn.core.requests.client_gone()
    (stats,) = quota.stats(clock.now_ms())
    assert stats.abandoned_count == 2 and stats.tokens == 1


def test_a_held_produce_whose_client_half_closes_ends_the_connection_once_the_answers_before_it_are_out(hold):
    """Issue 35: the client half-closes (shutdown(SHUT_WR)) while its Produce is held. The Produce is never forwarded
    (the broker has seen the end), so it can never be answered: once the answers to what went before are out, the
    connection closes (drained) rather than leaving the client waiting for an answer that will not come. Before,
    the request stayed in flight for ever."""
    scope, clock = hold
    conn = HeldConnection(scope, clock)
    for pid in (1, 2):
        conn.send(produce(pid, corr=pid))
    conn.send(produce(3, corr=3))
    conn.core.requests.client_gone()  # eof_received: the hold is abandoned at once
    state = conn.step()
    assert not state.drained  # the answers to ids 1 and 2 are still due
    assert conn.core.flow.inflight.awaiting_response()
    for corr in (1, 2):  # the broker answers them; they go to the client, then the connection may close
        answer = new_response(PRODUCE, 9, responses=[{"name": "t", "partition_responses": [{"index": 0}]}])
        conn.core.broker_bytes(memoryview(encode_local_response(PRODUCE, 9, corr, answer)))
    assert conn.core.step(clock.now_ms() * 1_000_000).drained
