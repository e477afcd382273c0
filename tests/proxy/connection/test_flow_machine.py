"""A stateful property test of one connection's flow, on bytes, with a fake clock.

Hypothesis drives :class:`proxy.connection.core.ConnectionCore` (the flow, both splitters, the request and response
paths) through every way of cutting the request and response streams into reads, random throttles on any
request (a mute after the response in every version, Produce v5 as v7; acks=0 mutes), requests buffered and decided on
their body (answered locally, forwarded with a throttle, decided only after a lookup of the proxy's own, or held until
a time, as a Produce held for its new producer id, then forwarded or answered), back-pressure on both sides, the
in-flight bound, drain, the client closing (held requests abandoned, never forwarded), and the connection's one timer
running for a long silence (the request and idle timeouts close it); the broker either answers acks=0 produces
(Tansu) or not (Kafka); and events that cannot happen in the flow's state, which must raise
:class:`~proxy.connection.flow.FlowError` and change nothing. A simple model checks:

- when no reason holds, the client is read and nothing is held back;
- in the middle of a frame without back-pressure, the client is read;
- responses reach the client in request order, a throttled one at once (never held: Kafka >= 2.0 holds none);
- every reason has an exit: once back-pressure lifts and time passes the last deadline, every request is
  answered and reading is on (or the connection has drained);
- the throttle lifecycle is the flow's: no in-flight entry stays marked throttled once its response is out, and
  reads are small only while the connection is paused or holds bytes back (read sizing resets);
- a held request is decided no earlier than its time, by the flow's deadline; one whose client goes first is
  abandoned once and never forwarded; every other plan's abandon is never called;
- a close for a timeout names a bound the model agrees is past, and a silence longer than both timeouts, with the
  timer following the flow's deadline, always ends in one.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from config.loader import parse_config
from proxy.apis import PASS, AnswerLocally, ConnectionScope, ForwardRequest, HoldFor, LookUp, Plan
from proxy.cluster.topics import Topics
from proxy.codec.frame import BUFFER
from proxy.codec.header import RequestHeader, encode_request_header, encode_response_header, frame
from proxy.codec.messages import encode_response, new_response
from proxy.connection.core import ConnectionCore
from proxy.connection.flow import THROTTLED_READ_BYTES, FlowError
from proxy.connection.inflight import InFlight
from proxy.connection.timeouts import TIMEOUT_RECHECK_NS
from proxy.enforcement.proxy_quotas import ProxyQuotas
from proxy.session.session import Session
from quota.primitives.decision import Throttle
from tests.fakes import NULL_API_METRICS

pytestmark = pytest.mark.long_running(seconds=10)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


_METRICS = NULL_API_METRICS
# the port's quotas, none configured: the planner below decides every request itself
_SCOPE = ConnectionScope(
    None,
    Topics(),
    ProxyQuotas(
        parse_config({"upstream": {"bootstrap_servers": ["b:1"]}, "listeners": [{"name": "L", "bind": "h:2"}]})
    ).home,
)

# What a request is: (api, version, acks, throttle_ms or None, on_body) with on_body None (planned at the header),
# "local" (buffered, answered locally), "throttle" (buffered, throttled on its body), "lookup" (buffered, decided
# after the proxy's own request to the broker is answered: forwarded), "lookup-local" (the same, answered locally),
# "hold" (buffered, held for throttle_ms, then forwarded) or "hold-local" (the same, then answered locally).
REQUEST = st.one_of(
    st.tuples(
        st.just(0),
        st.sampled_from([5, 7]),
        st.sampled_from([1, 1, 0]),
        st.one_of(st.none(), st.integers(1, 3000)),
        st.none(),
    ),
    st.tuples(
        st.just(3),
        st.just(1),
        st.none(),
        st.none(),
        st.sampled_from([None, None, "local", "throttle", "lookup", "lookup-local"]),
    ),
    st.tuples(st.just(3), st.just(1), st.none(), st.integers(1, 3000), st.sampled_from(["hold", "hold-local"])),
)
RESPONSE_TIMEOUT_S, IDLE_TIMEOUT_S = 40.0, 60.0  # the connection's timeouts, ended by its one timer
TIMEOUT_RECHECK_S = TIMEOUT_RECHECK_NS / 1e9


def request_frame(corr: int, spec, padding: int) -> bytes:
    api, version, acks, _, _ = spec
    head = encode_request_header(api, version, corr, "c")
    if api == 0:  # Produce v3-8: transactional_id (null), acks, timeout_ms, then bytes the proxy never decodes
        body = _I16.pack(-1) + _I16.pack(acks) + _I32.pack(30000) + bytes(padding)
    else:
        body = bytes(padding)
    return frame(head + body)


def response_frame(api: int, version: int, corr: int, padding: int) -> bytes:
    if api == 0:  # a Produce response the proxy can decode to merge throttle_time_ms
        body = encode_response(0, version, new_response(0, version))
    else:
        body = bytes(padding)
    return frame(encode_response_header(api, version, corr) + body)


def reference_held(flow) -> bool:
    """A reason that stops reading at the next boundary holds, from the reasons themselves (what Flow keeps in _held,
    updated on each event)."""
    return bool(flow._muted_until or flow._throttled or flow._deciding or flow._responses_full or flow._draining)


def reference_read_size(flow, available: int, frame_remaining: int) -> int:
    """Flow.read_size as first written, its checks in their plain order (before the hot path's reordering), without
    the reset of small reads."""
    if frame_remaining and reference_held(flow):
        return min(available, frame_remaining)
    if flow._holds and not frame_remaining:
        return min(available, THROTTLED_READ_BYTES)
    if not frame_remaining and len(flow._requests) >= flow.max_inflight:
        return min(available, THROTTLED_READ_BYTES)
    if flow._small_reads:
        if flow._read_ahead.data is None and not reference_held(flow):
            return available
        return min(available, THROTTLED_READ_BYTES)
    return available


class FlowMachine(RuleBasedStateMachine):
    @initialize(
        specs=st.lists(REQUEST, min_size=1, max_size=12),
        paddings=st.lists(st.integers(0, 3000), min_size=12, max_size=12),
        max_inflight=st.integers(1, 4),
        answers_acks0=st.booleans(),
    )
    def setup(self, specs, paddings, max_inflight, answers_acks0):
        self.now = 1000.0
        self.specs = specs
        self.frames = [request_frame(i, s, paddings[i]) for i, s in enumerate(specs)]
        self.stream = b"".join(self.frames)
        self.boundaries = {0}
        pos = 0
        for f in self.frames:
            pos += len(f)
            self.boundaries.add(pos)
        self.pos = 0  # client bytes the proxy has read
        self.answers_acks0 = answers_acks0
        self.to_broker = bytearray()
        self.broker_parsed = 0  # bytes of to_broker parsed into requests
        self.broker_requests: list[tuple[int, int, int, bool]] = []  # (api, version, corr, expects) as received
        self.broker_answered = 0
        self.from_broker = bytearray()  # response bytes not yet read by the proxy
        self.to_client = bytearray()
        self.delivered: list[tuple[int, float]] = []  # (correlation id, time) as the client received them
        self.response_read: dict[int, float] = {}  # corr -> when the proxy read the end of its response
        self.response_end: dict[int, int] = {}  # corr -> offset in the broker's stream where its response ends
        self.broker_sent = 0
        self.client_full = self.broker_full = self.draining = False
        self.client_full_since = 0.0  # model time the client stopped taking responses
        self.last_read = self.now  # model time the client last sent bytes
        self.mute_bound = 0.0  # no mute can last past this (an upper bound the model keeps)
        self.paddings = paddings
        self.decided_at: dict[int, float] = {}  # corr -> when a held request's body was complete (model time)
        self.abandoned: list[int] = []  # held requests whose plan's abandon was called
        self.hold_ended: list[int] = []  # held requests decided when their time came
        self.client_gone = False
        self.closed: str | None = None  # the timeout the connection closed for
        self.steps = 0

        def planner(scope, session, header):
            corr = header.correlation_id
            spec = self.specs[corr]
            _, _, _, throttle_ms, on_body = spec
            if on_body in ("hold", "hold-local"):
                local = frame(encode_response_header(3, 1, corr) + b"held")

                def then():  # the hold's time has come: forwarded, or answered (in its turn)
                    self.hold_ended.append(corr)
                    return AnswerLocally(local) if on_body == "hold-local" else ForwardRequest()

                def hold(body):
                    self.decided_at[corr] = self.now
                    return HoldFor(throttle_ms, then)

                return Plan(action=BUFFER, decide=hold, abandon=lambda: self.abandoned.append(corr))
            if on_body == "local":
                local = frame(encode_response_header(3, 1, header.correlation_id) + b"local")
                return Plan(action=BUFFER, decide=lambda body: AnswerLocally(local))
            if on_body == "throttle":
                return Plan(action=BUFFER, decide=lambda body: ForwardRequest(throttle=Throttle(700, 700)))
            if on_body in ("lookup", "lookup-local"):
                local = frame(encode_response_header(3, 1, header.correlation_id) + b"looked up")
                then = (
                    (lambda answer: AnswerLocally(local))
                    if on_body == "lookup-local"
                    else (lambda answer: ForwardRequest())
                )
                return Plan(action=BUFFER, decide=lambda body: LookUp(3, 1, b"", then))
            if throttle_ms is not None:
                return Plan(throttle=Throttle(throttle_ms, throttle_ms))
            return PASS

        self.core = ConnectionCore(
            _SCOPE,
            Session("L", "127.0.0.1"),
            max_request_bytes=1 << 20,
            max_response_bytes=1 << 20,
            max_inflight=max_inflight,
            write_client=self._to_client,
            write_broker=self.to_broker.extend,
            clock=self._ns,
            api_metrics=lambda key: _METRICS,
            planner=planner,
            response_timeout_ns=round(RESPONSE_TIMEOUT_S * 1e9),
            idle_timeout_ns=round(IDLE_TIMEOUT_S * 1e9),
        )
        self.state = self.core.step(self._ns())

    def _ns(self) -> int:
        """The connection's clock (ns) at the model's time (seconds)."""
        return round(self.now * 1e9)

    # -- the fake ends ---------------------------------------------------------------------------------------------

    def _to_client(self, data) -> None:
        self.to_client += data
        while len(self.to_client) >= 8:
            size = _I32.unpack_from(self.to_client, 0)[0]
            if len(self.to_client) < size + 4:
                break
            corr = _I32.unpack_from(self.to_client, 4)[0]
            del self.to_client[: size + 4]
            self.delivered.append((corr, self.now))
            if corr >= 0:
                spec = self.specs[corr]
                self._never_early(corr)
                if spec[4] == "throttle":
                    self.mute_bound = max(self.mute_bound, self.now + 0.7)
                elif spec[3] is not None:
                    self.mute_bound = max(self.mute_bound, self.now + spec[3] / 1000)

    def _broker_parse(self) -> None:
        buf = self.to_broker
        while len(buf) - self.broker_parsed >= 4:
            size = _I32.unpack_from(buf, self.broker_parsed)[0]
            if len(buf) - self.broker_parsed < size + 4:
                return
            api, version, corr = struct.unpack_from(">hhi", buf, self.broker_parsed + 4)
            expects = True
            if api == 0:
                expects = self.specs[corr][2] != 0
                if self.specs[corr][3] is not None:
                    # an acks=0 mute starts at the header; bound it by the time the whole request was forwarded
                    self.mute_bound = max(self.mute_bound, self.now + self.specs[corr][3] / 1000)
            self.broker_requests.append((api, version, corr, expects))
            self.broker_parsed += size + 4
            if corr >= 0:
                self._never_early(corr)
                assert corr not in self.abandoned, f"held request {corr} forwarded after it was abandoned"

    def _never_early(self, corr: int) -> None:
        """A held request is decided (forwarded, or answered) no earlier than its time."""
        spec = self.specs[corr]
        if spec[4] in ("hold", "hold-local"):
            assert self.now >= self.decided_at[corr] + spec[3] / 1000 - 1e-9, f"held request {corr} decided early"

    def _apply(self) -> None:
        if self.closed:
            return
        self.steps += 1
        self.state = self.core.step(self._ns())
        self._broker_parse()
        if self.state.overdue is not None:
            self._closed_for(self.state.overdue)

    def _closed_for(self, reason: str) -> None:
        """The connection closes for a timeout: one the model agrees is past."""
        core = self.core
        waiting = (
            core.responses.receiving is not None
            or core.responses.dropping_since_ns
            or core.flow.inflight.oldest_waiting_ns() is not None
        )
        if reason == "idle":
            assert not waiting and self.now - self.last_read > IDLE_TIMEOUT_S, "closed idle too early"
        elif reason == "client_full":
            assert self.client_full and self.now - self.client_full_since > IDLE_TIMEOUT_S
        else:
            assert reason == "upstream_timeout" and waiting and not self.client_full, reason
        self.closed = reason
        core.close()

    # -- rules ----------------------------------------------------------------------------------------------------

    @precondition(lambda self: self.pos < len(self.stream) and not self.client_gone and not self.closed)
    @rule(size=st.integers(1, 5000))
    def client_sends(self, size):
        if not self.state.reading_client:
            return
        n = min(self.core.read_size(size), len(self.stream) - self.pos)
        self.core.flow.client_read(self._ns())  # as the socket code reports every read
        self.core.client_bytes(memoryview(self.stream)[self.pos : self.pos + n])
        self.pos += n
        self.last_read = self.now
        self._apply()

    @rule(count=st.integers(1, 3))
    def broker_answers(self, count):
        for _ in range(count):
            if self.broker_answered >= len(self.broker_requests):
                return
            api, version, corr, expects = self.broker_requests[self.broker_answered]
            self.broker_answered += 1
            if not expects and not self.answers_acks0:
                continue
            self.from_broker += response_frame(api, version, corr, self.paddings[corr % 12] if corr >= 0 else 0)
            self.response_end[corr] = self.broker_sent + len(self.from_broker)

    @precondition(lambda self: self.from_broker and not self.closed)
    @rule(size=st.integers(1, 5000))
    def broker_sends(self, size):
        if not self.state.reading_broker or self.closed:
            return
        chunk = bytes(self.from_broker[:size])
        del self.from_broker[:size]
        before = self.broker_sent
        self.broker_sent += len(chunk)
        for corr, end in self.response_end.items():
            if before < end <= self.broker_sent and corr >= 0:
                self.response_read[corr] = self.now
        self.core.broker_bytes(memoryview(chunk))
        self._apply()

    @precondition(lambda self: not self.closed)
    @rule(on=st.booleans())
    def client_backpressure(self, on):
        if on != self.client_full:
            self.client_full = on
            self.client_full_since = self.now
            self.core.flow.client_backpressure(on, self._ns())
            self._apply()

    @precondition(lambda self: not self.closed)
    @rule(on=st.booleans())
    def broker_backpressure(self, on):
        if on != self.broker_full:
            self.broker_full = on
            self.core.flow.broker_backpressure(on)
            self._apply()

    @rule(dt=st.sampled_from([0.001, 0.05, 0.3, 1.0, 3.5]))
    def time_passes(self, dt):
        self.now += dt
        self._apply()

    @precondition(lambda self: (self.steps > 8 or self.core.flow.held) and not self.client_gone and not self.closed)
    @rule()
    def client_closes(self):
        """The client half-closes (the socket code calls client_gone; the connection stays open for the answers):
        every held request is abandoned at once, never forwarded."""
        held_before = [c for c in self.decided_at if c not in self.hold_ended]
        self.client_gone = True
        self.core.requests.client_gone()
        assert self.core.flow.held == 0
        assert set(held_before) <= set(self.abandoned), "a held request was not abandoned when its client went"
        self._apply()

    @precondition(lambda self: self.steps > 12 and not self.closed)
    @rule()
    def silence(self):
        """Nothing happens for longer than both timeouts but the connection's one timer, which fires at the flow's
        deadline: the connection closes for a timeout."""
        end = self.now + RESPONSE_TIMEOUT_S + IDLE_TIMEOUT_S + 2 * TIMEOUT_RECHECK_S
        while not self.closed and self.now < end:
            deadline = self.state.deadline
            assert deadline is not None, "an open connection with no deadline: its timeouts would never be checked"
            self.now = min(end, max(self.now, deadline / 1e9))
            self._apply()
        assert self.closed, "a silence longer than both timeouts did not close the connection"

    @precondition(lambda self: not self.draining and not self.closed)
    @rule()
    def drain(self):
        self.draining = True
        self.core.flow.drain()
        self._apply()

    @precondition(lambda self: not self.closed)
    @rule(
        event=st.sampled_from(
            [
                "frame_ended",
                "response_without_throttle",
                "consumed_read_ahead",
                "decided",
                "client_backpressure",
                "broker_backpressure",
                "negative_mute",
                "frame_in_frame",
            ]
        )
    )
    def illegal_event(self, event):
        """An event the flow's state does not allow raises FlowError and leaves the state as it was."""
        flow = self.core.flow
        before = (flow.mid_frame, flow.read_ahead_bytes, flow.next_deadline(), flow.paused_at_boundary)
        if event == "frame_ended":
            if flow.mid_frame:
                return
            call = flow.frame_ended
        elif event == "frame_in_frame":
            if not flow.mid_frame:
                return
            call = flow.start_frame
        elif event == "response_without_throttle":
            entry = InFlight(RequestHeader(10, 0, 7, 99, "c", 14), 0, True)
            call = lambda: flow.throttled_response(entry, self._ns())  # noqa: E731
        elif event == "consumed_read_ahead":
            call = lambda: flow.consumed_read_ahead(flow.read_ahead_bytes + 1)  # noqa: E731
        elif event == "decided":
            if flow._deciding > flow.held:
                return
            call = flow.request_decided
        elif event == "client_backpressure":
            call = lambda: flow.client_backpressure(self.client_full, self._ns())  # noqa: E731
        elif event == "broker_backpressure":
            call = lambda: flow.broker_backpressure(self.broker_full)  # noqa: E731
        else:
            call = lambda: flow.mute(self._ns(), -1)  # noqa: E731
        try:
            call()
        except FlowError:
            pass
        else:
            raise AssertionError(f"illegal event {event} did not raise")
        after = (flow.mid_frame, flow.read_ahead_bytes, flow.next_deadline(), flow.paused_at_boundary)
        assert after == before, f"illegal event {event} changed the flow: {before} -> {after}"

    @precondition(lambda self: not self.closed)
    @rule(idle_s=st.sampled_from([0.01, 0.5, 2.0, 10.0]))
    def timeouts_checked(self, idle_s):
        """The flow names the bound a connection is past: a client that took no response, or an idle one."""
        core = self.core
        waiting = (
            core.responses.receiving is not None
            or core.responses.dropping_since_ns
            or core.flow.inflight.oldest_waiting_ns() is not None
        )
        past = core.overdue(self._ns(), 10**18, round(idle_s * 1e9))
        if self.client_full and self.now - self.client_full_since > idle_s + 1e-6:
            assert past == "client_full"
        elif self.client_full and self.now - self.client_full_since < idle_s - 1e-6:
            assert past != "client_full"
        if past == "idle":
            assert not waiting and self.now - self.last_read > idle_s - 1e-6
        elif past is None and not self.client_full and not waiting:
            assert self.now - self.last_read <= idle_s + 1e-6, "an idle connection is not reported idle"
        assert past != "upstream_timeout"  # the broker is given 10**18 ns

    # -- invariants -------------------------------------------------------------------------------------------------

    @invariant()
    def reading_whenever_no_reason_holds(self):
        if self.closed:
            return
        processed = self.pos - self.core.flow.read_ahead_bytes
        answered = {c for c, _ in self.delivered}
        waiting = [
            c
            for i, c in enumerate(range(len(self.specs)))
            if c < len(self.specs) and self._read(c, processed) and self._expects(c) and c not in answered
        ]
        draining = self.draining or self.core.flow.draining  # (a held request abandoned drains the connection)
        no_reason = (
            not self.client_full
            and not self.broker_full
            and not draining
            and not waiting
            and self.now >= self.mute_bound
            and not len(self.core.flow.inflight)
        )
        # (an acks=0 request to a broker that answers those stays queued, and counts against the in-flight bound,
        # until its dropped answer arrives: a reason too)
        if no_reason and self.pos < len(self.stream):
            assert self.state.reading_client, "no reason holds, yet the client is not read"
            assert self.core.flow.read_ahead_bytes == 0, "no reason holds, yet read-ahead is held back"
        if processed not in self.boundaries and not self.broker_full:
            assert self.state.reading_client, f"paused in the middle of a frame at {processed} without back-pressure"
        if self.broker_full:
            assert not self.state.reading_client, "the client is read while the broker's buffer is full"
        if processed in self.boundaries and processed < len(self.stream):
            # (a held request is not a throttle: its client is read once more, so that its close is seen)
            throttled_waiting = [
                c
                for c in waiting
                if self.specs[c][4] == "throttle"
                or (self.specs[c][3] is not None and self.specs[c][4] not in ("hold", "hold-local"))
            ]
            watched = self.core.flow.held and not self.core.flow.read_ahead_bytes  # one small read, held back
            if (draining or throttled_waiting) and not watched:
                assert not self.state.reading_client, (
                    f"the client is read past a boundary while {'draining' if draining else 'throttled'}"
                )

    @invariant()
    def responses_in_order_and_never_early(self):
        ids = [c for c, _ in self.delivered]
        expected = [c for c in range(len(self.specs)) if self._expects(c)]
        assert ids == expected[: len(ids)], f"responses out of order: {ids} vs {expected}"
        for corr, at in self.delivered:
            if corr in self.response_read and self.specs[corr][3] is not None:
                # a throttled response is never held for its throttle (Kafka >= 2.0, every version): the mute after
                # it is what holds the client
                assert at == self.response_read[corr], f"throttled response {corr} held until {at}"

    @invariant()
    def throttle_lifecycle_and_read_sizing(self):
        if self.closed:
            return
        flow = self.core.flow
        receiving = self.core.responses.receiving  # matched, its response not yet complete
        marked = sum(1 for e in flow.inflight.entries if e.throttled) + bool(receiving and receiving.throttled)
        assert marked == flow._throttled, f"{marked} entries marked throttled, the flow counts {flow._throttled}"
        if flow.unhindered and not flow.at_bound:  # (at the bound of requests alone reads are small: what comes waits)
            size = self.core.read_size(THROTTLED_READ_BYTES * 4)
            assert size == THROTTLED_READ_BYTES * 4, "reads stay small after the pause ended (read sizing not reset)"

    @invariant()
    def hot_path_checks_say_what_the_named_conditions_say(self):
        """The values kept for the hot path (Flow.unhindered, Flow._held, Flow.full_reads, updated on each event) and the checks written
        out inline (Flow.start_frame's pause, Flow.read_size's order) agree with the named conditions in every state
        reached; read_size's reset of small reads is undone after each look."""
        if self.closed:
            return
        flow = self.core.flow
        held = reference_held(flow)
        assert flow._held == held, "Flow._held disagrees with the reasons"
        named = not (flow._broker_full or flow._read_ahead.data is not None or held)
        assert flow.unhindered == named, "Flow.unhindered disagrees with the named conditions"
        assert flow.full_reads == (not held and not flow._small_reads), "Flow.full_reads disagrees with its reasons"
        paused = held or len(flow._requests) >= flow.max_inflight
        assert flow.paused_at_boundary == paused
        if not flow.mid_frame:  # start_frame's own check says the same (a frame it starts is undone after the look)
            unheard = flow.unheard
            assert flow.start_frame() is not paused
            flow._mid_frame, flow.unheard = False, unheard
        for available in (100, THROTTLED_READ_BYTES * 4):
            for remaining in {0, 7, self.core.request_remaining}:
                small, full = flow._small_reads, flow.full_reads
                expected = reference_read_size(flow, available, remaining)
                assert flow.read_size(available, remaining) == expected, (available, remaining)
                flow._small_reads, flow.full_reads = small, full

    def _expects(self, corr: int) -> bool:
        """The request gets an answer (an abandoned one never will)."""
        spec = self.specs[corr]
        return not (spec[0] == 0 and spec[2] == 0) and corr not in self.abandoned

    def _read(self, corr: int, processed: int) -> bool:
        """The request's first byte has been processed."""
        return sum(len(f) for f in self.frames[:corr]) < processed

    def _closed_checks(self) -> bool:
        """Closed for a timeout: every hold not yet decided was abandoned, once, and none forwarded after."""
        if not self.closed:
            return False
        undecided = [c for c in self.decided_at if c not in self.hold_ended]
        assert len(self.abandoned) == len(set(self.abandoned)) and set(undecided) <= set(self.abandoned)
        assert not set(self.abandoned) & set(self.hold_ended), "a hold both ended and abandoned"
        return True

    def teardown(self):
        if not hasattr(self, "core"):
            return
        if self._closed_checks():
            return
        if self.client_full:
            self.core.flow.client_backpressure(False, self._ns())
        if self.broker_full:
            self.core.flow.broker_backpressure(False)
        self.client_full = self.broker_full = False
        for _ in range(500):
            self._apply()
            if self._closed_checks():  # the model's time had passed a timeout already
                return
            if self.state.drained:
                break
            if self.state.reading_client and self.pos < len(self.stream) and not self.client_gone:
                n = min(self.core.read_size(4096), len(self.stream) - self.pos)
                self.core.client_bytes(memoryview(self.stream)[self.pos : self.pos + n])
                self.pos += n
                continue
            self.broker_answers(3)
            if self.from_broker:
                self.broker_sends(100_000)
                continue
            state = self.core.flow.mute_state
            if self.state.deadline is not None and ("THROTTLED" in state or "HELD" in state):
                self.now = max(self.now, self.state.deadline / 1e9) + 0.001  # a mute's or a hold's end
                continue
            if self.broker_answered < len(self.broker_requests):
                continue  # only silent acks=0 requests were answered this round
            break
        self._apply()
        ids = [c for c, _ in self.delivered]
        assert len(self.abandoned) == len(set(self.abandoned)), "a hold abandoned twice"
        assert not set(self.abandoned) & set(self.hold_ended), "a hold both ended and abandoned"
        assert all(self.specs[c][4] in ("hold", "hold-local") for c in self.abandoned)
        processed = self.pos - self.core.flow.read_ahead_bytes
        if self.client_gone:
            expected = [
                c
                for c in range(len(self.specs))
                if self._expects(c) and sum(len(f) for f in self.frames[: c + 1]) <= processed
            ]
        else:
            assert not self.abandoned, "a hold abandoned while its client stayed"
            expected = [c for c in range(len(self.specs)) if self._expects(c)]
        if self.client_gone and self.core.flow.mid_frame:
            # the client went in the middle of a request: it never ends, the broker's close (after the half-close
            # passed on) closes the connection
            assert ids == expected[: len(ids)]
        elif self.draining or self.core.flow.draining:
            assert self.state.drained, "draining never finished"
            assert ids == expected[: len(ids)]
            assert not self.to_client, "drained in the middle of a response: the client got part of it"
        else:
            assert ids == expected, f"not every request was answered: {ids} vs {expected}"
            if not self.client_gone:
                assert self.state.reading_client or self.pos == len(self.stream)
                assert self.core.flow.read_ahead_bytes == 0
            assert self.state.deadline is None or self.state.deadline > self._ns()


FlowMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
test_flow_machine = FlowMachine.TestCase


def test_local_answer_waits_for_a_streamed_response_to_end():
    """Found by the machine: a request answered locally on its body, completed while the broker's response to the
    request before it is half streamed to the client, must not be written into the middle of that response."""
    machine = FlowMachine()
    machine.setup(
        specs=[(3, 1, None, None, None), (3, 1, None, None, "local")],
        paddings=[13, 108] + [0] * 10,
        max_inflight=2,
        answers_acks0=False,
    )
    machine.client_sends(size=150)  # all of the first request, all but the last byte of the second
    machine.broker_answers(count=1)
    machine.broker_sends(size=8)  # the first response starts streaming to the client
    machine.client_sends(size=1)  # the second request completes and is answered locally
    assert machine.delivered == []
    machine.broker_sends(size=100)
    assert [corr for corr, _ in machine.delivered] == [0, 1]


def test_a_held_request_ends_on_the_deadline_and_one_whose_client_goes_is_abandoned_never_forwarded():
    """Two held requests, on the connection's own deadline: the first is forwarded when its time comes (not before),
    the second's client half-closes during its hold: abandoned at once, never forwarded, and once the first's answer
    is out the connection has drained."""
    machine = FlowMachine()
    machine.setup(
        specs=[(3, 1, None, 500, "hold"), (3, 1, None, 800, "hold")],
        paddings=[0] * 12,
        max_inflight=4,
        answers_acks0=False,
    )
    machine.client_sends(size=15)  # the first request, whole: held 500 ms
    assert machine.state.deadline == machine._ns() + 500_000_000 and machine.core.flow.mute_state == "MUTED_AND_HELD"
    machine.now += 0.499
    machine._apply()
    assert machine.broker_requests == []
    machine.now += 0.001
    machine._apply()  # the flow's deadline
    assert [corr for _, _, corr, _ in machine.broker_requests] == [0]
    machine.client_sends(size=15)  # the second: held 800 ms
    assert machine.core.flow.held == 1
    machine.steps = 9
    machine.client_closes()
    assert machine.abandoned == [1] and machine.core.flow.draining
    machine.broker_answers(count=1)
    machine.broker_sends(size=100)
    assert [corr for corr, _ in machine.delivered] == [0] and machine.state.drained
    machine.now += 1.0
    machine._apply()
    assert [corr for _, _, corr, _ in machine.broker_requests] == [0]


def test_a_silent_connection_is_closed_by_its_own_timer_for_the_bound_it_is_past():
    """No sweep: the connection's one deadline brings the idle check, and the close names the bound."""
    machine = FlowMachine()
    machine.setup(specs=[(3, 1, None, None, None)], paddings=[0] * 12, max_inflight=1, answers_acks0=False)
    machine.client_sends(size=15)  # a request the broker never answers
    machine.steps = 13
    machine.silence()
    assert machine.closed == "upstream_timeout" and abs(machine.now - (1000.0 + RESPONSE_TIMEOUT_S)) < 1e-6
    idle = FlowMachine()
    idle.setup(specs=[(3, 1, None, None, None)], paddings=[0] * 12, max_inflight=1, answers_acks0=False)
    idle.steps = 13
    idle.silence()
    assert idle.closed == "idle"
