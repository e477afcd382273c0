"""The flow object (proxy.connection.flow): see test_flow_machine.py for the stateful property test."""

import struct
from collections.abc import Callable

import pytest

from config.loader import parse_config
from proxy.apis import ConnectionScope, Session
from proxy.cluster.topics import Topics
from proxy.codec.apis import API_VERSIONS, LIST_OFFSETS, PRODUCE
from proxy.codec.header import encode_request_header, encode_response_header, frame
from proxy.codec.messages import decode_response, encode_request, encode_response, new_request, new_response
from proxy.connection.core import ConnectionCore
from proxy.connection.flow import THROTTLED_READ_BYTES, Flow, FlowError
from proxy.enforcement.proxy_quotas import ProxyQuotas
from quota.primitives.clock import ManualClock
from tests.fakes import NULL_API_METRICS


def core_between(
    quotas: ProxyQuotas, to_client: bytearray, to_broker: bytearray, max_inflight: int, clock: Callable[[], int]
) -> ConnectionCore:
    """A connection core under ``quotas``, what it writes to each side gathered in the two bytearrays."""
    return ConnectionCore(
        ConnectionScope(None, Topics(), quotas.home),
        Session("L", "127.0.0.1"),
        max_request_bytes=1 << 20,
        max_response_bytes=1 << 20,
        max_inflight=max_inflight,
        write_client=to_client.extend,
        write_broker=to_broker.extend,
        clock=clock,
        api_metrics=lambda key: NULL_API_METRICS,
    )


def test_a_client_held_on_a_timer_is_read_once_more_small_so_its_close_is_seen():
    """While a request waits on a lookup the client is not read; while it is held until a time (a held producer id),
    one small read is allowed, held back, and then reading stops until the hold's deadline decides it."""
    flow = Flow(10)
    flow.request_deciding()
    assert not flow.reading_client and flow.read_size(1 << 20, 0) == 1 << 20  # (small reads are a hold's only)
    flow.request_decided()
    decided = []
    flow.hold(0, 5, lambda: decided.append("due"), lambda: decided.append("abandoned"))
    assert flow.next_deadline() == 5_000_000 and flow.mute_state == "MUTED_AND_HELD"
    assert flow.reading_client and flow.read_size(1 << 20, 0) == THROTTLED_READ_BYTES
    flow.hold_back(b"next request bytes")
    assert not flow.reading_client  # one read, held back: no more until the hold ends
    assert flow.holds_due(4_999_999) == []
    (hold,) = flow.holds_due(5_000_000)
    hold.due()
    assert decided == ["due"] and flow.held == 0 and flow.next_deadline() is None
    assert flow.read_ahead_due()


def test_holds_end_in_deadline_order_and_leave_the_flow_when_the_client_goes():
    flow = Flow(10)
    flow.hold(0, 30, lambda: None, lambda: None)
    flow.hold(0, 10, lambda: None, lambda: None)
    flow.mute(0, 20)
    assert flow.next_deadline() == 10_000_000  # the earliest of every deadline: one timer
    assert [h.until for h in flow.holds_due(10_000_000)] == [10_000_000]
    assert flow.next_deadline() == 20_000_000 and flow.mute_state == "MUTED_AND_THROTTLED_AND_HELD"
    abandoned = flow.abandon_holds()
    assert [h.until for h in abandoned] == [30_000_000] and flow.held == 0
    with pytest.raises(FlowError):
        flow.request_decided()  # no lookup was waiting: the holds are not lookups
    with pytest.raises(FlowError):
        flow.hold(0, 0, lambda: None, lambda: None)


def test_timeouts_are_checked_at_the_flows_deadline_not_swept():
    """The timeouts' next check is part of the one deadline: the earliest time a bound could be past."""
    second = 1_000_000_000
    flow = Flow(10, response_timeout=30 * second, idle_timeout=60 * second)
    flow.timeouts.start(0)
    assert flow.next_deadline() == 30 * second  # a request read from now on is owed an answer 30 s later at most
    assert not flow.timeouts.due(30 * second - 1)
    flow.client_read(10 * second)
    assert flow.check_timeouts(30 * second, None) is None
    assert flow.next_deadline() == 60 * second  # now + 30 s; idle past 70 s
    assert flow.check_timeouts(60 * second, None) is None and flow.next_deadline() == 70 * second + 1
    assert flow.check_timeouts(70 * second + 1, None) == "idle"
    assert flow.next_deadline() is None  # past a bound: closed, nothing more to check
    waiting = Flow(10, response_timeout=30 * second, idle_timeout=60 * second)
    waiting.timeouts.start(0)
    assert waiting.check_timeouts(30 * second, 5 * second) is None  # a request read at 5 s: owed by 35 s
    assert waiting.next_deadline() == 35 * second + 1
    assert waiting.check_timeouts(35 * second + 1, 5 * second) == "upstream_timeout"
    with pytest.raises(FlowError):
        Flow(10).check_timeouts(0, None)


def test_the_mute_state_names_every_reason_as_kafkas_channel_mute_state_does():
    flow = Flow(1)
    assert flow.mute_state == "NOT_MUTED"
    flow.client_backpressure(True, 0)
    flow.broker_backpressure(True)
    flow.drain()
    assert flow.mute_state == "MUTED_AND_CLIENT_FULL_AND_BROKER_FULL_AND_DRAINING"
    flow.request_deciding()
    assert flow.mute_state.startswith("MUTED_AND_DECIDING_AND_")


def test_a_throttled_produce_v5_is_answered_at_once_and_the_next_request_waits_for_the_mute():
    """Kafka >= 2.0 answers a throttled request of every version at once and mutes the channel until the throttle
    ends (``KafkaApis``: "Send the response immediately. In case of throttling, the channel has already been
    muted"); only a KIP-219 client backs off by itself. Produce v5 (before KIP-219) over its quota: its response
    reaches the client as soon as the broker's does, carrying throttle_time_ms, and the next request, already sent,
    reaches the broker only once the throttle has passed (the proxy used to hold the response instead, so a
    client whose request.timeout.ms was below the throttle resent a batch already appended)."""
    clock = ManualClock(1_000_000)
    config = parse_config(
        {
            "upstream": {"bootstrap_servers": ["b:1"]},
            "listeners": [{"name": "L", "bind": "h:2"}],
            "quotas": [{"entity": {"client-id": "old"}, "producer_byte_rate": 1000}],
            "settings": {"quota.window.num": 2},
        }
    )
    to_client, to_broker = bytearray(), bytearray()
    ns = lambda: clock.now_ms() * 1_000_000  # noqa: E731
    core = core_between(ProxyQuotas(config, clock), to_client, to_broker, 5, ns)

    def produce(corr: int) -> bytes:
        body = encode_request(
            PRODUCE,
            5,
            new_request(
                PRODUCE,
                5,
                acks=1,
                timeout_ms=1000,
                topic_data=[{"name": "t", "partition_data": [{"index": 0, "records": bytes(4000)}]}],
            ),
        )
        return frame(encode_request_header(PRODUCE, 5, corr, "old") + body)

    def forwarded() -> list[int]:
        corrs = []
        while to_broker:
            size, _, _, corr = struct.unpack_from(">ihhi", to_broker)
            corrs.append(corr)
            del to_broker[: size + 4]
        return corrs

    # two requests sent back to back, as a client with more than one in flight does
    core.client_bytes(memoryview(produce(1) + produce(2)))
    core.step(ns())
    assert forwarded() == [1]  # 4 KB over a 1 KB/s quota (a burst of 1 KB): throttled, read no further
    core.broker_bytes(
        memoryview(frame(encode_response_header(PRODUCE, 5, 1) + encode_response(PRODUCE, 5, new_response(PRODUCE, 5))))
    )
    state = core.step(ns())
    size, corr = struct.unpack_from(">ii", to_client)
    assert corr == 1, "the throttled Produce v5 response was held instead of answered at once"
    throttle_ms = decode_response(PRODUCE, 5, bytes(to_client[8 : size + 4])).throttle_time_ms
    assert throttle_ms > 1000
    assert not state.reading_client and state.deadline == ns() + throttle_ms * 1_000_000
    clock.advance(throttle_ms - 1)
    core.step(ns())
    assert forwarded() == []  # muted: the next request waits for the throttle
    clock.advance(1)
    core.step(ns())
    assert forwarded() == [2]


def test_at_the_inflight_bound_alone_the_client_is_read_and_a_frame_past_it_waits_for_an_answer():
    """A client with as many requests in flight as the bound (a Java producer's 5) waits for an answer: its socket is
    not paused and resumed at every answer (two system calls per request). No request past the bound starts: one that
    comes is held back, reading stops, and it goes to the broker once an answer frees a place, in order."""
    config = parse_config({"upstream": {"bootstrap_servers": ["b:1"]}, "listeners": [{"name": "L", "bind": "h:2"}]})
    to_broker, to_client = bytearray(), bytearray()
    core = core_between(ProxyQuotas(config), to_client, to_broker, 2, lambda: 0)
    requests = [frame(encode_request_header(API_VERSIONS, 0, corr, "c")) for corr in range(3)]
    core.client_bytes(memoryview(requests[0] + requests[1]))
    state = core.step(0)
    assert core.flow.at_bound and core.flow.unhindered and state.reading_client
    assert core.read_size(1 << 20) == THROTTLED_READ_BYTES  # read on, little: what comes past the bound waits
    assert bytes(to_broker) == requests[0] + requests[1]
    core.client_bytes(memoryview(requests[2]))  # past the bound: not started
    assert not core.step(0).reading_client and core.flow.read_ahead_bytes == len(requests[2])
    assert bytes(to_broker) == requests[0] + requests[1]
    core.broker_bytes(memoryview(frame(encode_response_header(API_VERSIONS, 0, 0) + bytes(6))))
    state = core.step(0)  # an answer out: the held request goes, and the client is read again
    assert bytes(to_broker) == b"".join(requests) and core.flow.read_ahead_bytes == 0 and state.reading_client
    assert core.flow.at_bound and len(to_client) == 14


def test_a_read_is_bounded_at_a_frame_boundary_only_and_the_core_says_what_is_left_to_stream():
    """While splicing is possible a read at a frame boundary (client or broker) takes at most the splicer's bound (so
    a large frame's rest is spliced, not read); in the middle of a frame, or with no bound, as much as there is room
    for. After a read the core says how much of a streamed frame is still to come (what a splice could move)."""
    config = parse_config({"upstream": {"bootstrap_servers": ["b:1"]}, "listeners": [{"name": "L", "bind": "h:2"}]})
    to_broker, to_client = bytearray(), bytearray()
    core = core_between(ProxyQuotas(config), to_client, to_broker, 5, lambda: 0)
    assert core.read_size(1 << 20, 65536) == 65536
    assert core.read_size(1 << 20) == 1 << 20 and core.read_size(1000, 65536) == 1000
    request = frame(encode_request_header(LIST_OFFSETS, 5, 1, "c") + bytes(200_000))  # streamed, never decoded
    assert core.client_bytes(memoryview(request[:1000])) == len(request) - 1000  # streamed on, the rest to come
    assert core.read_size(1 << 20, 65536) == 1 << 20  # mid-frame: as much as there is room for
    assert core.client_bytes(memoryview(request[1000:])) == 0
    assert core.read_size(1 << 20, 65536) == 65536 and bytes(to_broker) == request
    # a broker read likewise, at a response frame boundary
    assert core.response_read_size(1 << 20, 65536) == 65536 and core.response_read_size(1000, 65536) == 1000
    assert core.response_read_size(1 << 20) == 1 << 20
    answer = frame(encode_response_header(LIST_OFFSETS, 5, 1) + bytes(200_000))
    assert core.broker_bytes(memoryview(answer[:1000])) == len(answer) - 1000
    assert core.response_read_size(1 << 20, 65536) == 1 << 20  # mid-frame: as much as there is room for
    assert core.broker_bytes(memoryview(answer[1000:])) == 0 and bytes(to_client) == answer
