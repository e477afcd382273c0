"""The C twin of the socket shell (proxy/connection/native/shell.c) against its reference, ``PureShell``: the same
random socket events through a connection built around each (its real core, flow, splitters, paths and write batch;
fakes for the sockets, the splicer, the counts and the loop, and for the connection's own methods the shell hands
the other cases to), and everything each did the same: every read's buffer size, every byte written to either side,
every hand-off of a read buffer, every call to the connection, the splicer and the counts, in order, with the state
of the flow after each event.

The events cover what the shell decides on: reads of either side cut anywhere (before the connection is open, while
it is, after it closed), requests throttled (the flow held, so the shell asks it for the read size and hands the
state to the connection), answered by the proxy or held until a time, the in-flight bound (reads kept small, the
bound counted), back-pressure on both sides, either transport keeping bytes it could not send (the read buffer handed
off), splicing possible or not with either boundary, a setup slot told of the broker's first reply, and a request or
a response that cannot be parsed (the connection told, and closed). Skipped where the extension is not built."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.apis import PASS, AnswerLocally, ForwardRequest, HoldFor, Plan
from proxy.codec.errors import ProtocolError
from proxy.codec.frame import BUFFER
from proxy.codec.header import encode_request_header, encode_response_header, frame
from proxy.connection import compiled
from proxy.connection.buffers import SharedReadBuffer
from proxy.connection.core import ConnectionCore
from proxy.connection.counted import Counted
from proxy.connection.shell import PureShell
from proxy.connection.write_batch import WriteBatch
from proxy.session.session import Session
from quota.primitives.decision import Throttle
from tests.fakes import NULL_API_METRICS
from tests.proxy.connection.test_flow_machine import _SCOPE

twin = pytest.importorskip("proxy.connection._native", reason="the C extension is not built here")
compiled.configure(twin)  # as proxy.connection.compiled does when it chooses the extension
twin.configure_shell(64 * 1024, 64 * 1024, Counted.bound_changed)  # as proxy.connection.shell does

_I32 = struct.Struct(">i")
KINDS = ["pass", "pass", "pass", "throttle", "local", "hold"]  # what the planner makes of a request


def request_frame(corr: int, padding: int) -> bytes:
    return frame(encode_request_header(3, 1, corr, "c") + bytes(padding))


class Rig:
    """A connection around a shell of ``cls``: its real core, the rest fakes recording what they are told."""

    def __init__(self, cls: type, kinds: list[str], paddings: list[int], max_inflight: int) -> None:
        self.seen: list = []
        self.now = 10**12  # ns
        self.kinds = kinds
        self.stream = b"".join(request_frame(i, paddings[i % len(paddings)]) for i in range(len(kinds)))
        self.pos = 0
        self.answers = bytearray()  # the broker's, not yet read by the proxy
        self.to_broker = bytearray()
        self.parsed = 0
        self.closed = False

        def planner(scope, session, header):
            corr = header.correlation_id  # (bytes of garbage cut into a frame may make any)
            kind = kinds[corr] if 0 <= corr < len(kinds) else "pass"
            if kind == "throttle":
                return Plan(throttle=Throttle(300, 300))
            if kind == "local":
                answer = frame(encode_response_header(3, 1, header.correlation_id) + b"local")
                return Plan(action=BUFFER, decide=lambda body: AnswerLocally(answer))
            if kind == "hold":
                return Plan(action=BUFFER, decide=lambda body: HoldFor(200, lambda: ForwardRequest()))
            return PASS

        self.client = Transport("client", self)
        self.broker = Transport("broker", self)
        self.writes = WriteBatch(self.client.write, self.broker.write, self.client.writelines, self.broker.writelines)
        self.core = ConnectionCore(
            _SCOPE,
            Session("L", "127.0.0.1"),
            max_request_bytes=1 << 20,
            max_response_bytes=1 << 20,
            max_inflight=max_inflight,
            write_client=self.writes.client,
            write_broker=self.writes.broker,
            clock=self.clock,
            api_metrics=lambda key: NULL_API_METRICS,
            planner=planner,
            response_timeout_ns=30 * 10**9,
            idle_timeout_ns=60 * 10**9,
        )
        self.flow = self.core.flow
        self.request_buffer = Buffer(self, "request", 256 * 1024)  # the rig stands for the listener's context too
        self.response_buffer = Buffer(self, "response", 256 * 1024)
        self.splices = Splices(self)
        self.counted = Counted(self)
        self.upstream = Upstream(self)
        self.shell = cls(
            self,
            self.core,
            self,
            self.writes,
            self.splices,
            self.counted,
            self,  # the loop: time()
            self.clock,
        )
        self.get_buffer, self.buffer_updated = self.shell.broker_reads(self.upstream)

    def clock(self) -> int:
        return self.now

    def time(self) -> float:  # the loop's
        return self.now / 1e9

    # -- the connection's own methods, which the shell hands the other cases to ------------------------------------

    def _read_client(self, nbytes: int) -> None:
        self.seen.append(("conn._read_client", nbytes))

    def _frame_error(self, direction: str, exc: ProtocolError) -> None:
        self.seen.append(("conn._frame_error", direction, str(exc)))
        self.close()

    def _broker_error(self, exc: ProtocolError) -> None:
        self.seen.append(("conn._broker_error", str(exc)))
        self.close()

    def _apply_state(self) -> None:
        if self.closed:
            return
        batch = self.writes.start(False)
        try:
            state = self.core.step(self.now)
        except ProtocolError as exc:  # held-back requests replayed
            self._frame_error("request", exc)
            return
        finally:
            if batch:
                self.writes.send()
        self.shell.reading_client = state.reading_client
        self.shell.reading_broker = state.reading_broker
        self.seen.append(("conn._apply_state", state))
        if state.overdue is not None or state.drained:
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.writes.send()
        self.shell.close()
        self.core.close()
        self.writes.close()

    # -- the broker: every request forwarded gets an answer, the proxy reads it when told ---------------------------

    def forwarded(self) -> None:
        buf = self.to_broker
        while len(buf) - self.parsed >= 12:
            size = _I32.unpack_from(buf, self.parsed)[0]
            if len(buf) - self.parsed < size + 4:
                return
            corr = _I32.unpack_from(buf, self.parsed + 8)[0]
            self.parsed += size + 4
            size = 70_000 if corr % 5 == 3 else corr * 37 % 300  # some large enough to splice the rest of
            self.answers += frame(encode_response_header(3, 1, corr) + bytes(size))

    # -- the events ---------------------------------------------------------------------------------------------------

    def run(self, op: tuple) -> None:
        kind = op[0]
        self.now += 1_000_000
        if kind == "client":
            if self.shell.reading_client and self.pos < len(self.stream):
                view = self.get_client_buffer()
                n = min(len(view), op[1], len(self.stream) - self.pos)
                view[:n] = self.stream[self.pos : self.pos + n]
                self.pos += n
                self.shell.client_read(n)
        elif kind == "garbage":  # a frame that declares a negative size
            if self.shell.reading_client:
                view = self.get_client_buffer()
                view[:4] = _I32.pack(-5)
                self.shell.client_read(4)
        elif kind == "broker":
            if self.shell.reading_broker and self.answers:
                view = self.get_buffer(65536)
                self.seen.append(("broker_buffer", len(view)))
                n = min(len(view), op[1], len(self.answers))
                view[:n] = self.answers[:n]
                del self.answers[:n]
                self.buffer_updated(n)
        elif kind == "bad_answer":
            view = self.get_buffer(65536)
            view[:4] = _I32.pack(-5)
            self.buffer_updated(4)
        elif kind == "open":
            self.shell.open(self.client, self.upstream)
            self._apply_state()
        elif kind == "keeps":  # a transport keeps bytes it could not send
            (self.client if op[1] else self.broker).buffered = op[2]
        elif kind == "client_backpressure":
            if self.flow._responses_full != op[1] and not self.closed:
                self.flow.client_backpressure(op[1], self.now)
                self.shell.apply()
        elif kind == "broker_backpressure":
            if self.flow._broker_full != op[1] and not self.closed:
                self.flow.broker_backpressure(op[1])
                self.shell.apply()
        elif kind == "time":
            self.now += op[1] * 1_000_000
            self._apply_state()
        elif kind == "splicing":
            self.splices.boundary_read_bytes, self.splices.possible = op[1], op[2]
        elif kind == "first_reply":
            self.upstream.on_first_reply = lambda: self.seen.append(("told of the first reply",))
        elif kind == "close":
            self.close()
        self.forwarded()
        flow = self.flow
        self.seen.append(
            (
                "after",
                kind,
                self.shell.state,
                self.shell.reading_client,
                self.shell.reading_broker,
                flow.unheard,
                flow.timeouts.last_read,
                flow.read_ahead_bytes,
                flow.full_reads,
                self.counted.at_bound_since,
            )
        )

    def get_client_buffer(self) -> memoryview:
        view = self.shell.client_buffer(65536)
        self.seen.append(("client_buffer", len(view)))
        return view


class Transport:
    def __init__(self, side: str, rig: Rig) -> None:
        self.side, self.rig = side, rig
        self.buffered = 0

    def write(self, data) -> None:
        self.rig.seen.append((f"write {self.side}", bytes(data)))
        if self.side == "broker":
            self.rig.to_broker += data

    def writelines(self, frames) -> None:
        for data in frames:
            self.write(data)

    def get_write_buffer_size(self) -> int:
        return self.buffered


class Buffer(SharedReadBuffer):
    def __init__(self, rig: Rig, side: str, size: int) -> None:
        super().__init__(size)
        self.rig, self.side = rig, side

    def hand_off(self, nbytes: int) -> None:
        self.rig.seen.append((f"hand_off {self.side}", nbytes))
        super().hand_off(nbytes)


class Splices:
    def __init__(self, rig: Rig) -> None:
        self.rig = rig
        self.boundary_read_bytes = 0
        self.possible = False

    def after_client_read(self) -> None:
        self.rig.seen.append(("splices.after_client_read",))

    def after_broker_read(self) -> None:
        self.rig.seen.append(("splices.after_broker_read",))


class Counted:
    def __init__(self, rig: Rig) -> None:
        self.rig = rig
        self.at_bound_since: float | None = None

    def bound_changed(self, now: float) -> None:
        self.rig.seen.append(("counted.bound_changed", now))
        self.at_bound_since = now if self.at_bound_since is None else None


class Upstream:
    def __init__(self, rig: Rig) -> None:
        self.rig = rig
        self.on_first_reply = None
        self.transport = rig.broker

    def replied(self) -> None:
        told, self.on_first_reply = self.on_first_reply, None
        if told is not None:
            told()


SIZES = st.sampled_from([1, 4, 7, 50, 200, 1000, 5000, 70_000, 1 << 20, 1 << 20, 1 << 20])  # cut anywhere
READS = st.tuples(st.sampled_from(["client", "broker"]), SIZES)
OPS = st.lists(
    st.one_of(
        *[READS] * 12,  # most events are reads
        st.tuples(st.just("open")),
        st.tuples(st.just("keeps"), st.booleans(), st.sampled_from([0, 0, 10])),
        st.tuples(st.sampled_from(["client_backpressure", "broker_backpressure"]), st.booleans()),
        st.tuples(st.just("time"), st.sampled_from([1, 150, 400])),
        st.tuples(st.just("splicing"), st.sampled_from([0, 100, 64 * 1024]), st.booleans()),
        st.tuples(st.just("first_reply")),
    ),
    min_size=20,
    max_size=80,
)
SETUP = st.tuples(
    st.lists(st.sampled_from(KINDS), min_size=1, max_size=24),
    st.lists(st.sampled_from([0, 0, 10, 10, 500, 3000, 70_000]), min_size=1, max_size=6),
    st.integers(1, 4),
    st.sampled_from([True, True, True, False]),  # opened before the first event (else when the events say)
)


# an event that ends the connection (or none), and where among the others it comes
ENDING = st.tuples(st.sampled_from([None, "garbage", "bad_answer", "close"]), st.integers(0, 80))


def run(cls: type, setup: tuple, ops: list[tuple]) -> list:
    kinds, paddings, max_inflight, open_first = setup
    rig = Rig(cls, kinds, paddings, max_inflight)
    for op in [("open",), *ops] if open_first else ops:
        rig.run(op)
    return rig.seen


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setup=SETUP, ops=OPS, ending=ENDING)
def test_the_twin_does_what_the_pure_shell_does(setup, ops, ending):
    if ending[0] is not None:
        ops = [*ops[: ending[1]], (ending[0],), *ops[ending[1] :]]
    assert run(twin.Shell, setup, ops) == run(PureShell, setup, ops)


def test_the_events_reach_every_case_the_shell_decides():
    """The strategies reach what they are meant to: a long run of both kinds of case through the pure shell."""
    kinds = ["pass", "pass", "throttle", "pass", "local", "pass", "hold", "pass"] * 5
    rounds = [("client", 70_000), ("broker", 70_000), ("time", 400)]
    ops = [("splicing", 100, True), ("open",), *rounds * 6, ("keeps", True, 10), *rounds * 3, ("keeps", True, 0)]
    ops += [("keeps", False, 10), *rounds * 3, ("keeps", False, 0), ("first_reply",), *rounds * 2]
    ops += [("client_backpressure", True), ("client", 1 << 20), ("client_backpressure", False), ("broker", 3)]
    ops += [("broker", 1 << 20), ("time", 400)] * 4 + [("bad_answer",)]  # at a response boundary
    seen = run(PureShell, (kinds, [70_000, 10], 1, False), ops)
    names = {entry[0] for entry in seen}
    for wanted in (
        "client_buffer",
        "broker_buffer",
        "write broker",
        "write client",
        "hand_off request",
        "hand_off response",
        "conn._apply_state",
        "counted.bound_changed",
        "splices.after_client_read",
        "splices.after_broker_read",
        "told of the first reply",
        "conn._broker_error",
    ):
        assert wanted in names, wanted
    assert run(twin.Shell, (kinds, [70_000, 10], 1, False), ops) == seen
