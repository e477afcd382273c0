"""The C twin of the in-flight queue (proxy/connection/native/inflight.c) against its reference, ``PureInFlightQueue``:
the same random requests (answered and acks=0, the proxy's own answers, probes, lookups, abandoned ones), responses
(in order, out of order, for nothing queued) and entry changes through both, and after every step the same answer
(the same entry, or the same error) and the same state: the entries in order with every field, the broker's acks=0
behaviour as learned, the probe's flags, the local answers' count. Skipped where the extension is not built."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.apis.response_leg import NO_LEG, ResponseLeg
from proxy.codec.errors import ProtocolError
from proxy.codec.header import RequestHeader
from proxy.connection import compiled
from proxy.connection import inflight as inflight_module
from proxy.connection.inflight import PureInFlight, PureInFlightQueue

twin = pytest.importorskip("proxy.connection._native", reason="the C extension is not built here")
compiled.configure(twin)  # as proxy.connection.compiled does when it chooses the extension

if compiled.NATIVE is None:  # the pure classes in use (KAFKA_QUOTA_PROXY_PURE_PYTHON): the twin's own class

    class CQueue(inflight_module._OwnRequests, twin.Queue):
        __slots__ = ()
        _entry = twin.InFlight

else:
    CQueue = inflight_module.InFlightQueue

LEG = ResponseLeg(rewrite=lambda body: None)  # a leg of a plan's (compared by identity)
THROTTLE = object()  # a throttle (the queue only keeps it)
IDS = st.integers(-3, 6) | st.just(-(2**31))  # few ids: responses often match, and the probe's id is taken at times

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), IDS, st.sampled_from([None, 0, 1, -1]), st.booleans()),
        st.tuples(st.just("add_local"), IDS, st.binary(max_size=3)),
        st.tuples(st.just("pop_ready_local")),
        st.tuples(st.just("answer_locally"), st.integers(0, 30), st.binary(max_size=3)),
        st.tuples(st.just("abandon"), st.integers(0, 30)),
        st.tuples(st.just("match"), IDS | st.sampled_from(["oldest", "newest"])),
        st.tuples(st.just("probe")),
        st.tuples(st.just("look_up"), st.sampled_from(["last", "none", "other"]), st.sampled_from([None, "tenant"])),
        st.tuples(st.just("change"), st.integers(0, 30), st.sampled_from(["throttle", "throttled", "leg"])),
        st.tuples(st.just("set_acks0"), st.sampled_from([None, True, False])),
    ),
    max_size=60,
)


class Side:
    """One queue and the entries it handed out, numbered in the order they were handed out."""

    def __init__(self, queue) -> None:
        self.queue = queue
        self.handed: list = []
        self.clock = 0

    def name(self, entry) -> object:
        """An entry as the other side can compare it: its number if it was handed out, else its fields."""
        for number, handed in enumerate(self.handed):
            if handed is entry:
                return ("handed", number, fields(entry))
        return ("internal", fields(entry))

    def run(self, op: tuple) -> object:
        q = self.queue
        self.clock += 1
        kind = op[0]
        if kind == "add":
            _, cid, acks, with_leg = op
            entry = q.add(
                RequestHeader(100, 3 if acks is None else 0, 9, cid, "c", 20, acks),
                self.clock,
                LEG if with_leg else NO_LEG,
            )
            if entry is not None:
                self.handed.append(entry)
            return None if entry is None else self.name(entry)
        if kind == "add_local":
            return q.add_local(RequestHeader(100, 3, 9, op[1], "c", 20), self.clock, op[2])
        if kind == "pop_ready_local":
            entry = q.pop_ready_local()
            return None if entry is None else self.name(entry)
        if kind in ("answer_locally", "abandon", "change"):
            if not self.handed:
                return "nothing handed out"
            entry = self.handed[op[1] % len(self.handed)]
            if kind == "answer_locally":
                return q.answer_locally(entry, op[2])
            if kind == "abandon":
                return q.abandon(entry)
            if op[2] == "throttle":
                entry.throttle = THROTTLE
            elif op[2] == "throttled":
                entry.throttled = not entry.throttled
            else:
                entry.leg = LEG if entry.leg is NO_LEG else NO_LEG
            return fields(entry)
        if kind == "match":
            cid = op[1]
            queued = list(q)
            if cid == "oldest":
                cid = queued[0].header.correlation_id if queued else 99
            elif cid == "newest":
                cid = queued[-1].header.correlation_id if queued else 99
            entry = q.match(cid)
            return None if entry is None else self.name(entry)
        if kind == "probe":
            return q.probe(self.clock)
        if kind == "look_up":
            queued = list(q)
            waiting = {"last": queued[-1] if queued else None, "none": None, "other": queued[0] if queued else None}
            return q.look_up(waiting[op[1]], self.clock, 3, 12, b"\x00\x00", lambda body: None, op[2])
        q.broker_answers_acks0 = op[1]  # set_acks0: as a test or a restored state may
        return None

    def state(self) -> tuple:
        q = self.queue
        return (
            [self.name(e) for e in q],
            len(q),
            len(q.entries),
            q.broker_answers_acks0,
            q.probe_wanted,
            q._probe_sent,
            q.local_answers,
            q.oldest_waiting_ns(),
            q.awaiting_response(),
        )


def fields(entry) -> tuple:
    leg = entry.leg
    legs = "none" if leg is NO_LEG else "plan" if leg is LEG else ("lookup" if leg.lookup is not None else leg)
    header = entry.header
    return (
        header.api_key,
        header.api_version,
        header.correlation_id,
        header.client_id,
        entry.received_ns,
        entry.expects_response,
        legs,
        entry.local_response,
        entry.throttle is THROTTLE,
        entry.throttled,
        entry.probe,
    )


def outcome(side: Side, op: tuple) -> object:
    try:
        return ("ok", side.run(op))
    except ProtocolError as exc:
        return ("protocol error", str(exc))
    except ValueError:  # an entry not in the queue (the deque's message, the twin's own)
        return ("value error",)


@settings(max_examples=400, deadline=None)
@given(OPS)
def test_the_twin_answers_as_the_pure_queue_at_every_step(ops):
    pure, native = Side(PureInFlightQueue()), Side(CQueue())
    for step, op in enumerate(ops):
        assert outcome(native, op) == outcome(pure, op), (step, op)
        assert native.state() == pure.state(), (step, op)


def test_an_entry_is_made_and_changed_as_the_dataclass_is():
    header = RequestHeader(100, 0, 9, 7, "c", 20, 1)
    for cls in (PureInFlight, twin.InFlight):
        entry = cls(header, 5, True, probe=True)
        assert (entry.header, entry.received_ns, entry.expects_response, entry.leg, entry.local_response) == (
            header,
            5,
            True,
            NO_LEG,
            None,
        )
        assert (entry.throttle, entry.throttled, entry.probe) == (None, False, True)
        entry.throttled, entry.throttle, entry.leg, entry.local_response = True, THROTTLE, LEG, b"x"
        assert (entry.throttled, entry.throttle, entry.leg, entry.local_response) == (True, THROTTLE, LEG, b"x")
    assert repr(twin.InFlight(header, 5, False)).startswith("InFlight(header=")


@pytest.mark.parametrize("received_ns", [0, 1, 2**30 - 1, 2**30, 2**60 + 7, 2**63 - 1, -(2**63), -(2**40)])
def test_times_and_ids_of_64_bits_are_read_whole(received_ns):
    """The twin reads ints of several 30-bit digits (a monotonic clock's nanoseconds, 64-bit ids) by their digits:
    every value of 64 bits comes back as it went in."""
    queue = CQueue()
    header = RequestHeader(100, 0, 9, 2**31 - 1, "c", 20, 1)
    queue.add(header, received_ns)
    queue.add_local(RequestHeader(100, 0, 9, -(2**31), "c", 20, 1), received_ns, b"x")
    assert [e.received_ns for e in (queue.match(2**31 - 1), queue.pop_ready_local())] == [received_ns, received_ns]


@pytest.mark.parametrize(
    "received_ns, error",
    [(2**63, OverflowError), (-(2**63) - 1, OverflowError), (2**90, OverflowError), ("1", TypeError)],
)
def test_what_is_not_a_64_bit_int_is_refused_as_the_c_api_refuses_it(received_ns, error):
    header = RequestHeader(100, 0, 9, 7, "c", 20, 1)
    with pytest.raises(error, match="int too big to convert|cannot be interpreted as an integer"):
        CQueue().add(header, received_ns)
    with pytest.raises(error):
        CQueue().add_local(header, received_ns, b"x")
    with pytest.raises(error):
        CQueue().match(received_ns)


def test_a_queue_holding_a_cycle_is_collected():
    """A lookup's leg holds the request path's closure, which holds the queue: the twin takes part in the cycle
    collector, so a closed connection's queue is freed."""
    import gc
    import weakref

    class Holder:
        pass

    holder = Holder()
    holder.queue = CQueue()
    holder.queue.look_up(None, 0, 3, 12, b"", lambda body, held=holder: None)
    gone = weakref.ref(holder)
    del holder
    gc.collect()
    assert gone() is None
