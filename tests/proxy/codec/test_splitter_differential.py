"""The C frame splitter (proxy/codec/native/splitter.c) against the pure class it mirrors (``PureFrameSplitter``):
the same streams of frames, cut anywhere, with the same actions at each header (stream, buffer, drop, stop), a gate
refusing boundaries and the refused bytes fed again, bytes passed around the splitter while a frame streams,
closes, calls out of turn; after every call the same outcome (the event, or the error's class and message) and
the same state (``value``'s type and bytes, the header, ``remaining``, ``streaming``, ``stopped``,
``at_frame_boundary``).

The rest of the codec's tests (tests/proxy/codec/test_frame.py, the fuzz driver) run the bound ``FrameSplitter``:
the C one where it is built. This module ties the two together, so each is tested through the other."""

from __future__ import annotations

import struct
import sys
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.codec import frame as frame_module
from proxy.codec.accel import NATIVE
from proxy.codec.frame import BOUNDARY, BUFFER, DROP, HEADER, NEED_DATA, STOP, STREAM, PureFrameSplitter
from proxy.codec.header import encode_request_header, frame, parse_response_prefix
from proxy.codec.produce_prefix import parse_request_prefix
from tests.twins import outcome

pytestmark = pytest.mark.skipif(NATIVE is None, reason="the C extension is not built here (or is switched off)")

MAX = 1 << 16
_SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))


def native_class():
    return NATIVE.FrameSplitter


def parse_request(buf):
    return parse_request_prefix(buf, MAX)


def parse_response(buf):
    return parse_response_prefix(buf, MAX)


def header_fields(header):
    if header is None:
        return None
    return tuple((name, getattr(header, name, "(unset)")) for name in type(header).__slots__)


def state(splitter):
    value = splitter.value
    return (
        None if value is None else (type(value), bytes(value)),
        header_fields(splitter.header),
        splitter.remaining,
        splitter.streaming,
        splitter.stopped,
        splitter.at_frame_boundary,
    )


@st.composite
def streams(draw, responses: bool) -> bytes:
    """Frames as a peer sends them: well formed, some large, some with a bad size or a header cut short."""
    parts = []
    for corr in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["ok", "ok", "ok", "big", "garbage", "short"]))
        body = draw(st.binary(max_size=40)) if kind != "big" else bytes(draw(st.integers(600, 3000)))
        if responses:
            payload = struct.pack(">i", corr) + body
        else:
            client_id = draw(st.sampled_from(["", "c", "client-" * draw(st.integers(1, 90))]))
            payload = encode_request_header(draw(st.sampled_from([0, 1, 3, 18])), 3, corr, client_id) + body
        if kind == "garbage":
            parts.append(draw(st.binary(min_size=1, max_size=12)))
        elif kind == "short":
            parts.append(struct.pack(">i", draw(st.integers(0, 7))) + payload[:7])
        else:
            parts.append(frame(payload))
    return b"".join(parts)


def drive(data, stream: bytes, gated: bool, parse) -> None:
    """One stream through both splitters, every call's outcome and the state after it compared."""
    pure, native = PureFrameSplitter(parse, gated=gated), native_class()(parse, gated=gated)
    pos, held = 0, b""

    def both(name, *args):
        got = outcome(getattr(native, name), *args)
        assert got == outcome(getattr(pure, name), *args), name
        assert state(native) == state(pure), name
        return got

    while pos < len(stream) or held:
        size = data.draw(st.integers(1, 700))
        chunk = held + stream[pos : pos + size]
        pos += size
        held = b""
        kind = data.draw(st.sampled_from([bytes, bytearray, memoryview]))
        if both("receive", kind(chunk))[0] == "raised":
            return
        for _ in range(200):
            if data.draw(st.integers(0, 30)) == 0:  # out of turn: the same refusal, or the same effect
                call = data.draw(st.sampled_from(["take_rest", "close", "receive"]))
                got = both(call, *((b"x",) if call == "receive" else ()))
                if call == "take_rest" and got[0] == "bytes":
                    held = got[2]
                    break
            if native.streaming and data.draw(st.booleans()):
                both("passed", data.draw(st.integers(-1, native.streaming + 1)))
            got = both("next_event")
            if got[0] == "raised":
                return
            event = got[1]
            if event is NEED_DATA:
                break
            if event is BOUNDARY and data.draw(st.integers(0, 4)) == 0:
                rest = both("take_rest")
                held = rest[2]
                break
            if event is HEADER:
                both("act", data.draw(st.sampled_from([STREAM, STREAM, BUFFER, BUFFER, DROP, STOP])))


@_SETTINGS
@given(data=st.data(), gated=st.booleans())
def test_request_streams_split_alike(data, gated):
    drive(data, data.draw(streams(responses=False)), gated, parse_request)


@_SETTINGS
@given(data=st.data(), gated=st.booleans())
def test_response_streams_split_alike(data, gated):
    drive(data, data.draw(streams(responses=True)), gated, parse_response)


def test_the_c_splitter_is_the_bound_one():
    assert frame_module.FrameSplitter is native_class()


def test_the_c_splitter_keeps_no_chunk_and_leaks_nothing():
    """Once a chunk is used up the splitter holds no reference to it (an idle connection keeps no memory), and
    splitting many frames leaves the interpreter's object count where it was."""
    one = frame(encode_request_header(3, 12, 7, "c") + b"x" * 100)
    chunk = bytearray(one * 3)
    before = sys.getrefcount(chunk)
    splitter = native_class()(parse_request, gated=True)
    for action in (STREAM, BUFFER, DROP):
        view = memoryview(chunk)
        splitter.receive(view)
        while (event := splitter.next_event()) is not NEED_DATA:
            if event is HEADER:
                splitter.act(action)
        del view, event
    assert sys.getrefcount(chunk) == before
    tracemalloc.start()
    try:
        for rounds in (200, 2000):
            for _ in range(rounds):
                splitter.receive(memoryview(chunk))
                while (event := splitter.next_event()) is not NEED_DATA:
                    if event is HEADER:
                        splitter.act(BUFFER)
            if rounds == 200:
                baseline = tracemalloc.get_traced_memory()[0]
        grown = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    assert grown < 4096, f"{grown} bytes kept after 2,000 more rounds of 3 frames"


class Third:
    """A third kind of header: its size in a slot at another offset than either header's."""

    __slots__ = ("pad", "correlation_id", "size")

    def __init__(self, real) -> None:
        self.pad, self.correlation_id, self.size = None, real.correlation_id, real.size


class Computed:
    """A header whose size is a property, not a slot."""

    __slots__ = ("correlation_id", "_size")

    def __init__(self, real) -> None:
        self.correlation_id, self._size = real.correlation_id, real.size

    @property
    def size(self):
        return self._size


class Unset:
    """A header whose size slot was never set: the same AttributeError from both."""

    __slots__ = ("correlation_id", "size")

    def __init__(self, real) -> None:
        self.correlation_id = real.correlation_id


KINDS = [lambda real: real, Third, Computed, lambda real: real, Third, Unset]


def parse_mixed(buf):
    """Headers of several kinds in turn on one call site of the C splitter: the two it keeps the slot of, a third,
    a property, an unset slot (the kind by the correlation id)."""
    real = parse_response_prefix(buf, MAX)
    return KINDS[real.correlation_id % len(KINDS)](real)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_header_size_read_as_the_generic_access_reads_it(data):
    drive(data, data.draw(streams(responses=True)), False, parse_mixed)
