"""The connection's C twins (proxy/connection/native/: the in-flight queue, the request and response paths'
per-frame methods and their event loops, the per-API counts) against the pure classes, a whole connection core at a
time: two cores, one over each, get the same client requests (streamed, buffered and answered locally, throttled at
the header or on the body, decided after a lookup of the proxy's own, held with a reservation, with a response leg
that rewrites the answer, Produce v10 with cluster mode's node-endpoint leg; acks=0 Produce; decided on the body to be
forwarded, with legs joined; answers rewritten and charged by their leg, throttled by the charge or not), the same
broker answers
(from a broker that answers acks=0 or stays silent), every stream cut anywhere, clients that half-close or vanish,
and the same clock; after every step both wrote the same bytes to each side, counted the same responses with the
same latencies in the API metrics (a log of the calls, or the proxy's own ApiMetrics, which the twin adds to itself)
and the usage log, said the same state and raised the same error. Skipped where the extension is not built."""

from __future__ import annotations

import struct
from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from proxy.apis import PASS, AnswerLocally, ForwardRequest, HoldFor, LookUp, Plan
from proxy.apis.response_leg import ResponseLeg
from proxy.apis.usage import Usage
from proxy.codec.errors import ProtocolError
from proxy.codec.frame import BUFFER, DROP
from proxy.codec.header import encode_request_header, encode_response_header, frame
from proxy.codec.messages import encode_response, new_response
from proxy.codec.skim import tag_of, tagged_fields
from proxy.connection import compiled, core, flow, inflight, request_path, response_path
from proxy.connection.core import ConnectionCore
from proxy.connection.presence import GONE, PRESENT
from proxy.ops.metrics import ApiMetrics
from proxy.ops.usage_table import NO_USAGE, UsageTable
from proxy.session.session import Session
from quota.primitives.decision import FORWARD, Throttle
from tests.proxy.connection.test_flow_machine import _SCOPE, request_frame, response_frame

twin = pytest.importorskip("proxy.connection._native", reason="the C extension is not built here")
compiled.configure(twin)  # as proxy.connection.compiled does when it chooses the extension

if compiled.NATIVE is None:  # the pure classes in use (KAFKA_QUOTA_PROXY_PURE_PYTHON): the twin's own classes

    class NativeQueue(inflight._OwnRequests, twin.Queue):
        __slots__ = ()
        _entry = twin.InFlight

    class NativeResponses(response_path._Legs, twin.Responses):
        __slots__ = ()

    class NativeRequests(request_path._Decisions, twin.Requests):
        __slots__ = ()

else:
    NativeQueue, NativeResponses = inflight.InFlightQueue, response_path.ResponsePath
    NativeRequests = request_path.RequestPath

PURE = (inflight.PureInFlightQueue, response_path.PureResponsePath, request_path.PureRequestPath)
NATIVE = (NativeQueue, NativeResponses, NativeRequests)

_I32 = struct.Struct(">i")
NODE_ENDPOINTS = tag_of(0, "response", 10, "node_endpoints")


def request(corr: int, spec) -> bytes:
    """The request frame the client sends for ``spec``: Produce v10 laid out as a flexible version is (a null
    transactional id, acks, the timeout, no topics), the others as tests/proxy/connection/test_flow_machine.py
    lays them out."""
    if spec[1] != 10:
        return request_frame(corr, spec, 20 + 7 * corr)
    body = b"\x00" + struct.pack(">hi", spec[2], 30000) + b"\x01\x00"
    return frame(encode_request_header(0, 10, corr, "c") + body)


PLAN_LEG = ResponseLeg(rewrite=lambda body: bytes(body) + b"plan")
OUTCOME_LEG = ResponseLeg(rewrite=lambda body: bytes(body) + b"outcome")
OTHER_LEG = ResponseLeg(rewrite=lambda body: bytes(body) + b"other")


def charge(corr: int):
    """A consumer byte rate's charge: mostly a plain forward, a throttle (applied, or shadow) by the size and request."""

    def charged(nbytes: int):
        turn = (nbytes + corr) % 5
        return Throttle(250, 250) if turn == 0 else Throttle(90, 90, shadow=True) if turn == 1 else FORWARD

    return charged


def charge_failing(nbytes: int):
    raise ValueError("not a charge this answer can take")


def undecidable(body):
    raise ValueError("not this API's body")


def throttle(ms):
    return None if ms is None else Throttle(ms, ms)


# (api, version, acks, throttle at the header, on the body): as tests/proxy/connection/test_flow_machine.py's, and
# "leg" (streamed, its answer rewritten: buffered back), "usage" (what planning accounted for, recorded), "hold"
# (buffered, held 300 ms for a token the plan reserved, released if the client goes first), "local-header" (answered
# at the header, the body dropped), "moved" (Produce v10 with cluster mode's node-endpoint leg: a rewrite alone, kept
# unless the answer carries NodeEndpoints, which the broker adds to every other answer); decided on the body:
# "forward" (forwarded as it is), "forward-leg" and "forward-leg-2" (the plan's leg, then the outcome's, another
# for each: the last join kept for the next request), "forward-body" (its body replaced), "forward-abandon" (with a
# reservation released if the client goes first), "undecidable" (a body the decision cannot read: a ProtocolError);
# "charged" (streamed, its answer buffered back for a leg that may rewrite it and charges its size: mostly a plain
# forward, else a throttle, applied or shadow), "charged-observed" (the same with an observer), "charged-failing" (a
# charge that cannot be made: a ProtocolError)
REQUEST = st.one_of(
    st.tuples(st.just(0), st.sampled_from([5, 7]), st.sampled_from([1, 1, 0]), st.none() | st.just(300), st.none()),
    st.tuples(
        st.just(3),
        st.just(1),
        st.none(),
        st.none() | st.just(200),
        st.sampled_from(
            [None, None, "local", "throttle", "lookup", "lookup-local", "leg", "usage", "hold"]
            + ["forward", "forward-leg", "forward-leg-2", "forward-body", "forward-abandon", "undecidable"]
            + ["charged", "charged", "charged-observed", "charged-failing"]
        ),
    ),
    st.tuples(st.just(3), st.just(1), st.none(), st.none(), st.just("local-header")),
    st.tuples(st.just(0), st.just(10), st.just(1), st.none() | st.just(300), st.just("moved")),
)
STEPS = st.lists(
    st.tuples(st.sampled_from(["client", "client", "broker", "broker", "tick", "gone", "vanish"]), st.integers(1, 400)),
    max_size=80,
)


class Side:
    """One connection core over one set of classes, with a broker that answers what reaches it, in order."""

    def __init__(self, classes, specs, answers_acks0: bool, usage: bool, counts: bool = False) -> None:
        queue_class, responses_class, requests_class = classes
        self.specs, self.answers_acks0 = specs, answers_acks0
        self.requests = b"".join(request(i, spec) for i, spec in enumerate(specs))
        self.sent = 0  # request bytes the client has sent
        self.to_client, self.to_broker = bytearray(), bytearray()
        self.broker_read = 0  # bytes of to_broker the broker has parsed
        self.answers = bytearray()  # the broker's answers, not yet read by the proxy
        self.now_ns = 1_000_000_000
        self.closed: tuple | None = None  # the error the connection closed for
        self.gone = False  # the client half-closed (the socket code saw its end and told the core)
        self.vanished = False  # the client is gone and nothing told the core: the kernel says so when asked
        self.metrics: list[tuple] = []  # what the API metrics, the planner's abandons and the account were told
        # counts: the proxy's own ApiMetrics (which the twin adds to itself), one per API; else a log of the calls
        self.counts: dict[int, ApiMetrics] | None = {} if counts else None
        self.usage = UsageTable() if usage else NO_USAGE
        with (
            mock.patch.object(flow, "InFlightQueue", queue_class),
            mock.patch.object(core, "ResponsePath", responses_class),
            mock.patch.object(core, "RequestPath", requests_class),
        ):
            self.core = ConnectionCore(
                _SCOPE,
                Session("L", "127.0.0.1"),
                max_request_bytes=1 << 20,
                max_response_bytes=1 << 20,
                max_inflight=4,
                write_client=self.to_client.extend,
                write_broker=self.to_broker.extend,
                clock=lambda: self.now_ns,
                api_metrics=self._metrics,
                planner=self._plan,
                usage=self.usage,
                client_state=lambda: GONE if self.vanished else PRESENT,
            )
        assert type(self.core.flow.inflight) is queue_class and type(self.core.responses) is responses_class
        assert type(self.core.requests) is requests_class
        self.state = self.core.step(self.now_ns)

    def _metrics(self, api_key: int):
        if self.counts is not None:
            return self.counts.setdefault(api_key, ApiMetrics())
        side = self

        class Counted:
            def request(self, nbytes: int) -> None:
                side.metrics.append(("request", api_key, nbytes))

            def answered(self, nbytes: int, seconds: float) -> None:
                side.metrics.append(("answered", api_key, nbytes, seconds))

        return Counted()

    def _plan(self, scope, session, header) -> Plan:
        corr = header.correlation_id
        _, _, _, throttle_ms, on_body = self.specs[corr]
        local = frame(encode_response_header(3, 1, corr) + b"local")
        if on_body == "local":
            return Plan(action=BUFFER, decide=lambda body: AnswerLocally(local))
        if on_body == "throttle":
            return Plan(action=BUFFER, decide=lambda body: ForwardRequest(throttle=Throttle(700, 700)))
        if on_body in ("lookup", "lookup-local"):
            then = (lambda answer: AnswerLocally(local)) if on_body == "lookup-local" else lambda a: ForwardRequest()
            return Plan(action=BUFFER, decide=lambda body: LookUp(3, 1, b"", then))
        if on_body == "leg":
            return Plan(leg=ResponseLeg(rewrite=lambda body: bytes(body) + b"rewritten"))
        if on_body == "forward":
            return Plan(action=BUFFER, decide=lambda body: ForwardRequest())
        if on_body == "forward-leg":
            return Plan(action=BUFFER, leg=PLAN_LEG, decide=lambda body: ForwardRequest(leg=OUTCOME_LEG))
        if on_body == "charged":  # a rewrite (or none) and a charge, as a consumer Fetch's leg in cluster mode
            rewrite = (lambda body: bytes(body) + b"trimmed") if corr % 3 else None
            return Plan(leg=ResponseLeg(rewrite=rewrite, record_response=charge(corr)))
        if on_body == "charged-observed":
            return Plan(
                leg=ResponseLeg(
                    observe=lambda body: self.metrics.append(("observed", corr, bytes(body))),
                    record_response=charge(corr),
                )
            )
        if on_body == "charged-failing":
            return Plan(leg=ResponseLeg(rewrite=lambda body: None, record_response=charge_failing))
        if on_body == "forward-leg-2":
            return Plan(action=BUFFER, leg=PLAN_LEG, decide=lambda body: ForwardRequest(leg=OTHER_LEG))
        if on_body == "forward-abandon":
            return Plan(
                action=BUFFER,
                decide=lambda body: ForwardRequest(),
                abandon=lambda: self.metrics.append(("abandoned", corr)),
            )
        if on_body == "forward-body":
            return Plan(action=BUFFER, decide=lambda body: ForwardRequest(body=bytes(body) + b"more"))
        if on_body == "undecidable":
            return Plan(action=BUFFER, decide=undecidable)
        if on_body == "usage":
            return Plan(usage=Usage(new_producer_ids=1 + corr))
        if on_body == "hold":
            return Plan(
                action=BUFFER,
                decide=lambda body: HoldFor(300, ForwardRequest),
                abandon=lambda: self.metrics.append(("abandoned", corr)),
            )
        if on_body == "moved":

            def moved(body):
                return bytes(body) + b"moved" if NODE_ENDPOINTS in tagged_fields(0, "response", 10, body) else None

            return Plan(leg=ResponseLeg(rewrite=moved, unless_tagged=NODE_ENDPOINTS), throttle=throttle(throttle_ms))
        if on_body == "local-header":
            return Plan(action=DROP, local_response=local)
        if throttle_ms is not None:
            return Plan(throttle=Throttle(throttle_ms, throttle_ms))
        return PASS

    def _broker(self) -> None:
        """The broker reads what reached it and answers each request in order (acks=0: if it answers those)."""
        buf = self.to_broker
        while len(buf) - self.broker_read >= 12:
            size = _I32.unpack_from(buf, self.broker_read)[0]
            if len(buf) - self.broker_read < size + 4:
                return
            api, version, corr = struct.unpack_from(">hhi", buf, self.broker_read + 4)
            self.broker_read += size + 4
            if corr < 0 or api == 18:  # the proxy's own (the probe, a lookup): answered all the same
                self.answers += frame(encode_response_header(api, version, corr) + b"\x00\x00")
            elif api == 0 and self.specs[corr][2] == 0 and not self.answers_acks0:
                continue
            elif api == 0 and version == 10:  # NodeEndpoints in every other answer (a leader moved)
                nodes = [{"node_id": 1, "host": "h", "port": 9, "rack": None}] if corr % 2 else []
                body = encode_response(0, 10, new_response(0, 10, node_endpoints=nodes))
                self.answers += frame(encode_response_header(0, 10, corr) + body)
            else:
                self.answers += response_frame(api, version, corr, 5 + corr)

    def run(self, step: tuple[str, int]) -> object:
        kind, n = step
        c = self.core
        if self.closed is not None:  # the socket code closed the connection at its error: nothing more happens
            return self.closed
        try:
            # (a vanished client's bytes still arrive: it wrote them before it went)
            if (
                kind == "client" and self.state.reading_client and not self.gone
            ):  # as the socket code reads: only when told, so much
                n = c.read_size(n)
                data, self.sent = self.requests[self.sent : self.sent + n], min(len(self.requests), self.sent + n)
                if data:
                    c.client_bytes(memoryview(data))
            elif kind == "broker" and self.state.reading_broker:
                self._broker()
                n = c.response_read_size(n)
                data, self.answers = bytes(self.answers[:n]), self.answers[n:]
                if data:
                    c.broker_bytes(memoryview(data))
            elif kind == "tick":
                self.now_ns += n * 1_000_000
            elif kind == "gone" and not self.gone:  # the client half-closes, as the socket code tells the core
                self.gone = True
                c.requests.client_gone()
            elif kind == "vanish":
                self.vanished = True
            state = self.state = c.step(self.now_ns)
        except ProtocolError as exc:
            self.closed = ("protocol error", str(exc))
            return self.closed
        receiving = c.responses.receiving
        return (
            state,
            None if receiving is None else receiving.header.correlation_id,
            c.responses.dropping_since_ns,
            len(c.flow.inflight),
            bytes(self.to_client),
            bytes(self.to_broker),
            list(self.metrics),
            counted(self.counts),
            sorted((key, vars_of(row)) for key, row in self.usage.take(self.now_ns).items()),
        )


def counted(counts: dict[int, ApiMetrics] | None) -> object:
    if counts is None:
        return None
    return sorted(
        (key, m.requests, m.request_bytes, m.response_bytes, m.latency_sum, list(m.latency_counts))
        for key, m in counts.items()
    )


def vars_of(row) -> tuple:
    return tuple(getattr(row, name) for name in type(row).__slots__)


@settings(max_examples=300, deadline=None)
@example(  # the client goes while a held request's body is still being read: its plan's reservation released
    specs=[(3, 1, None, None, "hold")],
    answers_acks0=False,
    usage=False,
    steps=[("client", 20), ("gone", 1)],
    counts=False,
)
@example(  # two joins of one plan's leg with a different outcome's leg each: the second is not the first's
    specs=[(3, 1, None, None, "forward-leg"), (3, 1, None, None, "forward-leg-2")],
    answers_acks0=False,
    usage=False,
    steps=[],
    counts=False,
)
@example(  # forwarded on its body, then the client goes: its reservation was released when it was forwarded
    specs=[(3, 1, None, None, "forward-abandon"), (3, 1, None, None, "hold")],
    answers_acks0=False,
    usage=False,
    steps=[("client", 1 << 20), ("gone", 1)],
    counts=False,
)
@example(  # answers charged: plain forwards, applied and shadow throttles, rewritten or not, an observer, a failure
    specs=[(3, 1, None, None, "charged")] * 7
    + [(3, 1, None, None, "charged-observed"), (3, 1, None, None, "charged-failing")],
    answers_acks0=False,
    usage=True,
    steps=[("client", 1 << 20), ("broker", 1 << 20), ("tick", 300)] * 3,
    counts=False,
)
@given(
    specs=st.lists(REQUEST, min_size=1, max_size=10),
    answers_acks0=st.booleans(),
    usage=st.booleans(),
    steps=STEPS,
    counts=st.booleans(),
)
def test_a_core_over_the_twins_does_what_one_over_the_pure_classes_does(specs, answers_acks0, usage, steps, counts):
    pure = Side(PURE, specs, answers_acks0, usage, counts)
    native = Side(NATIVE, specs, answers_acks0, usage, counts)
    for number, step in enumerate(steps + [("client", 1 << 20)] + [("broker", 1 << 20), ("tick", 1000)] * 4):
        assert native.run(step) == pure.run(step), (number, step)


def test_the_pure_side_is_what_the_scenarios_exercise():
    """The scenarios reach what the twins do: streamed, buffered and dropped answers, local ones, the probe."""
    specs = [(0, 7, 0, None, None), (3, 1, None, None, "leg"), (3, 1, None, None, "local"), (3, 1, None, 200, None)]
    side = Side(PURE, specs, True, True)
    for step in [("client", 1 << 20), ("broker", 1 << 20), ("tick", 1000)] * 3:
        side.run(step)
    answered = [m for m in side.metrics if m[0] == "answered"]
    assert len(answered) == 3  # the leg's, the local one, the throttled one (the acks=0 answer dropped)
    assert b"rewritten" in side.to_client and b"local" in side.to_client
