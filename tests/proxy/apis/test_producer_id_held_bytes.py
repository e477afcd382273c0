"""Issue 35: bytes of Produce requests held for their new producer ids are bounded per connection
(``connections.max.held.request.bytes``) and in the process (``max.held.request.bytes``). On a connection core with a
fake clock: the held bytes never pass either bound, a Produce that would pass one is answered with the retriable
NOT_ENOUGH_REPLICAS (its id not counted, its token left in the bucket) and goes through at once when retried after
the reported throttle, and a hold's bytes come back when it is forwarded or as soon as its client leaves.
Before the bounds, every such Produce was held whole, whatever its size and however many there were."""

from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatchBuilder

from proxy.apis import Session
from proxy.codec.apis import PRODUCE
from proxy.codec.error_codes import NOT_ENOUGH_REPLICAS
from proxy.codec.header import encode_request_header, frame, response_header_length
from proxy.codec.messages import decode_response, encode_request, new_request
from quota.primitives.clock import ManualClock
from quota.primitives.held_bytes import CONNECTION, PROXY
from tests.proxy.byte_rate_scopes import scope_with

QUOTA = [{"entity": {"user": "<default>"}, "producer_ids_rate": 2}]
# burst 2, a token every 5 s, holds of up to 20 s
SETTINGS = {
    "producer.id.quota.window.num": 1,
    "producer.id.quota.window.size.seconds": 10,
    "producer.id.quota.max.hold.ms": 20_000,
    "quota.mute.max.ms": 25_000,
}
VALUE = 64 * 1024  # each Produce carries one record of this many bytes


def produce(pid: int, corr: int, value: int = VALUE) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
        batch_size=1 << 22,
    )
    builder.append(0, timestamp=0, key=None, value=bytes(value), headers=[])
    msg = new_request(
        PRODUCE,
        9,
        acks=-1,
        timeout_ms=30000,
        topic_data=[{"name": "t", "partition_data": [{"index": 0, "records": bytes(builder.build())}]}],
    )
    return bytearray(frame(encode_request_header(PRODUCE, 9, corr, "p") + encode_request(PRODUCE, 9, msg)))


SIZE = len(produce(1, 1))


class Connection:
    """A connection core on the fake clock; a hold is the flow's, ended by its deadline."""

    def __init__(self, scope, clock, ip="10.0.0.1"):
        from proxy.connection.core import ConnectionCore
        from tests.fakes import NULL_API_METRICS

        self.to_broker, self.to_client = bytearray(), bytearray()
        self.clock, self.session = clock, Session("L", ip)
        self.core = ConnectionCore(
            scope,
            self.session,
            max_request_bytes=1 << 22,
            max_response_bytes=1 << 20,
            max_inflight=10,
            write_client=self.to_client.extend,
            write_broker=self.to_broker.extend,
            clock=lambda: clock.now_ms() * 1_000_000,
            api_metrics=lambda key: NULL_API_METRICS,
        )

    def send(self, buf):
        self.core.client_bytes(memoryview(buf))
        return self.core.step(self.clock.now_ms() * 1_000_000)

    @property
    def held(self) -> int:
        return self.core.flow.held

    def end_hold(self):
        """The clock is past the hold's end: the flow's deadline decides it."""
        self.core.step(self.clock.now_ms() * 1_000_000)

    def answer(self):
        """The proxy's own answer to the last request: (partition error codes, throttle_time_ms)."""
        data = bytes(self.to_client)
        body = data[response_header_length(PRODUCE, 9, data) :]
        response = decode_response(PRODUCE, 9, body)
        return [p.error_code for t in response.responses for p in t.partition_responses], response.throttle_time_ms


def burst(scope, clock):
    """The bucket's two tokens used by two producers: the next new id waits 5 s, the one after 10 s, ..."""
    for pid in (1, 2):
        Connection(scope, clock, f"10.0.1.{pid}").send(produce(pid, 1))


def test_a_produce_larger_than_the_connection_bound_is_refused_not_held_and_admitted_on_its_retry():
    clock = ManualClock(1_000_000)
    scope = scope_with(QUOTA, clock, **SETTINGS, **{"connections.max.held.request.bytes": SIZE - 1})
    held, quota = scope.quotas.held_bytes, scope.quotas.producer_ids
    burst(scope, clock)
    conn = Connection(scope, clock)
    conn.send(produce(3, corr=7))
    assert not conn.held and held.total == 0 and conn.session.held_bytes == 0  # nothing held
    assert conn.answer() == ([NOT_ENOUGH_REPLICAS], 5_000)  # retriable, back when the hold would have ended
    assert not conn.to_broker  # never reached the broker
    assert held.refused == {CONNECTION: 1, PROXY: 0}
    (stats,) = quota.stats(clock.now_ms())
    assert stats.new_pids_total == 2 and stats.refused_count == 1 and stats.tokens == 0  # not counted, token kept
    clock.advance(5_000)  # the client retries after throttle_time_ms (the mute ends too): its token is there
    retry = Connection(scope, clock, "10.0.0.9")
    retry.send(produce(3, corr=8))
    assert not retry.held and len(retry.to_broker) == SIZE  # streamed to the broker, never held


def test_held_bytes_never_pass_the_process_bound_and_come_back_when_a_hold_is_forwarded():
    clock = ManualClock(1_000_000)
    bound = 2 * SIZE + SIZE // 2  # room for two holds
    scope = scope_with(QUOTA, clock, **SETTINGS, **{"max.held.request.bytes": bound})
    held = scope.quotas.held_bytes
    burst(scope, clock)
    conns = [Connection(scope, clock, f"10.0.0.{i}") for i in range(4)]
    peak = 0
    for i, conn in enumerate(conns[:3]):  # 3 new ids: held 5 s, held 10 s, no room
        conn.send(produce(10 + i, corr=1))
        peak = max(peak, held.total)
    assert peak == held.total == 2 * SIZE <= bound
    assert [c.held for c in conns[:3]] == [1, 1, 0]
    assert [c.session.held_bytes for c in conns[:3]] == [SIZE, SIZE, 0]
    assert conns[2].answer() == ([NOT_ENOUGH_REPLICAS], 15_000)  # when its hold would have ended
    assert held.refused == {CONNECTION: 0, PROXY: 1}
    clock.advance(5_000)
    conns[0].end_hold()  # the first hold ends: forwarded, its bytes no longer held
    assert len(conns[0].to_broker) == SIZE and held.total == SIZE and conns[0].session.held_bytes == 0
    conns[3].send(produce(20, corr=1))  # room again: the next new id is held (until 10 s after the one before)
    assert conns[3].held == 1 and held.total == 2 * SIZE


def test_a_held_produce_whose_client_goes_gives_its_token_and_bytes_back_at_once():
    """The client closes during the hold: the hold leaves the connection's flow with it, so its token goes back and
    the request's bytes are freed, and uncounted, at once (they were counted until the timer ended while a task
    slept on them), and nothing reaches the broker when its time would have come."""
    clock = ManualClock(1_000_000)
    scope = scope_with(QUOTA, clock, **SETTINGS)
    held = scope.quotas.held_bytes
    burst(scope, clock)
    conn = Connection(scope, clock)
    conn.send(produce(3, corr=1))
    assert held.total == SIZE and conn.held == 1
    conn.core.requests.client_gone()
    assert held.total == 0 and held.requests == 0 and conn.session.held_bytes == 0 and not conn.held
    clock.advance(5_000)
    conn.end_hold()
    assert held.total == 0 and not conn.to_broker


def test_a_client_that_goes_in_the_middle_of_a_held_request_gives_its_bytes_back_at_once():
    clock = ManualClock(1_000_000)
    scope = scope_with(QUOTA, clock, **SETTINGS)
    held = scope.quotas.held_bytes
    burst(scope, clock)
    conn = Connection(scope, clock)
    conn.send(produce(3, corr=1)[: SIZE // 2])  # the header is read: the hold is decided, its bytes reserved
    assert held.total == SIZE and not conn.held
    conn.core.close()
    assert held.total == 0 and conn.session.held_bytes == 0


def test_a_zero_connection_bound_holds_nothing_and_every_would_be_hold_is_refused():
    clock = ManualClock(1_000_000)
    scope = scope_with(QUOTA, clock, **SETTINGS, **{"connections.max.held.request.bytes": 0})
    burst(scope, clock)
    conn = Connection(scope, clock)
    conn.send(produce(3, corr=1, value=1))
    assert not conn.held and conn.answer()[0] == [NOT_ENOUGH_REPLICAS]
