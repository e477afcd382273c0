"""The C twin of the write batch (proxy/connection/native/writes.c) against its reference, ``PureWriteBatch``: the
same random events (batches started for one side or both, writes to either side, sends, a side routed to other
callables, a close) through both, and
every write and send each made, in order, with what it was handed, the same; so are the answers of ``start`` and the
errors raised. The sockets' callables may act on the batch while they are called, as a socket event caused by a write
would (a nested batch started and sent, a write, the connection closed), or raise. Skipped where the extension is not
built."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from proxy.connection import compiled
from proxy.connection.write_batch import PureWriteBatch

twin = pytest.importorskip("proxy.connection._native", reason="the C extension is not built here")
compiled.configure(twin)  # as proxy.connection.compiled does when it chooses the extension

# a frame written: its number, and what the socket does when handed it (nothing, or an event on the batch)
REACTIONS = st.sampled_from(["none", "none", "none", "start", "start_client", "send", "close", "write", "raise"])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("start"), st.booleans()),
        st.tuples(st.sampled_from(["client", "broker"]), REACTIONS),
        st.tuples(st.just("send")),
        st.tuples(st.just("close")),
        st.tuples(st.just("route"), st.booleans()),
    ),
    max_size=40,
)


class Broken(Exception):
    """What a socket's callable raised."""


def run(cls: type, ops: list[tuple]) -> list:
    """The events ``ops`` through a batch of ``cls``: everything its callables were handed, and each op's answer."""
    seen: list = []
    frames: dict[int, str] = {}  # frame number -> its reaction

    def react(number: int) -> None:
        reaction = frames.get(number, "none")
        frames[number] = "none"  # once: a frame handed again (in a send) does not react again
        if reaction == "start":
            seen.append(("nested start", batch.start(False)))
        elif reaction == "start_client":
            seen.append(("nested start", batch.start(True)))
        elif reaction == "send":
            batch.send()
        elif reaction == "close":
            batch.close()
        elif reaction == "write":
            batch.client(-number)
        elif reaction == "raise":
            raise Broken(number)

    def write(side: str):
        def written(data: int) -> None:
            seen.append((f"write {side}", data))
            react(data)

        return written

    def send(side: str):
        def sent(frames_: list) -> None:
            seen.append((f"send {side}", list(frames_)))
            for number in list(frames_):
                react(number)

        return sent

    batch = cls(write("client"), write("broker"), send("client"), send("broker"))
    for at, op in enumerate(ops):
        try:
            if op[0] == "start":
                seen.append(("start", batch.start(op[1])))
            elif op[0] in ("client", "broker"):
                frames[at] = op[1]
                getattr(batch, op[0])(at)
            elif op[0] == "send":
                batch.send()
            elif op[0] == "route":  # a side's callables from now on (as a splice starts or ends)
                routed = "client" if op[1] else "broker"
                batch.route(op[1], write(f"{routed} routed {at}"), send(f"{routed} routed {at}"))
            else:
                batch.close()
        except Broken as exc:
            seen.append(("raised", exc.args))
    return seen


@settings(max_examples=600, deadline=None)
@given(OPS)
@example([("start", True), ("client", "none"), ("broker", "raise"), ("send",)])  # the client's writes lost with it
@example([("start", True), ("client", "none"), ("broker", "close"), ("send",)])  # closed: the client's dropped
@example([("start", True), ("client", "send"), ("client", "none"), ("broker", "none"), ("send",)])
def test_the_twin_writes_and_sends_as_the_pure_batch(ops: list[tuple]) -> None:
    assert run(twin.WriteBatch, ops) == run(PureWriteBatch, ops)


def test_a_batch_of_several_frames_is_one_send_and_a_single_frame_one_write() -> None:
    """Not only the same as the pure one: what the batch is for (a bug shared by both would pass the test above)."""
    for cls in (twin.WriteBatch, PureWriteBatch):
        ops = [("start", True), ("broker", "none"), ("broker", "none"), ("client", "none"), ("send",)]
        assert run(cls, ops) == [("start", True), ("send broker", [1, 2]), ("write client", 3)]
        ops = [("start", False), ("client", "none"), ("broker", "none"), ("send",), ("close",), ("broker", "none")]
        assert run(cls, ops) == [("start", True), ("write client", 1), ("write broker", 2)]
