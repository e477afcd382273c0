"""The frame splitter on bytes: every chunking of the same stream gives the same frames; its events are pulled."""

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.codec.errors import ProtocolError
from proxy.codec.frame import (
    BOUNDARY,
    BUFFER,
    DROP,
    END,
    FRAME,
    HEADER,
    LAST_SEGMENT,
    NEED_DATA,
    SEGMENT,
    STOP,
    STREAM,
    FrameSplitter,
    SplitterError,
)
from proxy.codec.header import encode_request_header, frame, parse_response_prefix
from proxy.codec.produce_prefix import parse_request_prefix
from tests.fuzz.codec_driver import feed

MAX = 1 << 20


class Recorder:
    """Frame handler and gate at once: records everything, refuses boundaries while ``paused_at_boundary``."""

    paused_at_boundary = False

    def __init__(self, action=lambda h: STREAM):
        self.action = action
        self.headers, self.streamed, self.frames, self.ends = [], bytearray(), [], []
        self.starts = 0

    def start_frame(self):
        if self.paused_at_boundary:
            return False
        self.starts += 1
        return True

    def on_header(self, h):
        self.headers.append(h)
        return self.action(h)

    def on_segment(self, view):
        self.streamed += view

    def on_frame(self, h, f):
        self.frames.append(bytes(f))

    def on_frame_end(self, h):
        self.ends.append(h.correlation_id)


def requests(n, seed=1):
    rnd = random.Random(seed)
    out = []
    for corr in range(n):
        body = bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 300)))
        out.append(frame(encode_request_header(3, rnd.choice([8, 12]), corr, "c" * rnd.randrange(0, 40)) + body))
    return out


def feed_in_chunks(splitter, rec, data, sizes):
    pos = 0
    while pos < len(data):
        n = next(sizes)
        feed(splitter, memoryview(bytearray(data[pos : pos + n])), rec)  # fresh buffer each time, as a socket would
        pos += n


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1000, 100000])
def test_streamed_bytes_are_identical_for_any_chunking(chunk):
    frames = requests(50)
    stream = b"".join(frames)
    rec = Recorder()
    feed_in_chunks(FrameSplitter(lambda b: parse_request_prefix(b, MAX)), rec, stream, iter(lambda: chunk, None))
    assert bytes(rec.streamed) == stream
    assert [h.correlation_id for h in rec.headers] == list(range(50))
    assert rec.ends == list(range(50))


def test_random_chunking_buffer_and_drop():
    frames = requests(60, seed=2)
    rnd = random.Random(3)
    action = lambda h: (STREAM, BUFFER, DROP)[h.correlation_id % 3]  # noqa: E731
    rec = Recorder(action)
    feed_in_chunks(
        FrameSplitter(lambda b: parse_request_prefix(b, MAX)),
        rec,
        b"".join(frames),
        iter(lambda: rnd.randrange(1, 50), None),
    )
    assert bytes(rec.streamed) == b"".join(f for i, f in enumerate(frames) if i % 3 == 0)
    assert rec.frames == [f for i, f in enumerate(frames) if i % 3 == 1]
    assert rec.ends == list(range(60))


def test_bytes_passed_by_the_caller_end_a_streamed_frame_as_if_fed():
    """The socket code splices the rest of a streamed frame itself: the splitter is told, never fed those bytes,
    and the frames after it split as before, whatever the cut."""
    frames = requests(40, seed=4)
    rnd = random.Random(5)
    rec = Recorder(lambda h: BUFFER if h.correlation_id % 4 == 3 else STREAM)
    s = FrameSplitter(lambda b: parse_request_prefix(b, MAX))
    stream, pos, passes = b"".join(frames), 0, 0
    while pos < len(stream):
        n = rnd.randrange(1, 200)
        pos += feed(s, memoryview(bytearray(stream[pos : pos + n])), rec)
        if s.streaming and rnd.random() < 0.5:
            passed = rnd.randrange(1, s.streaming + 1)
            s.passed(passed)
            feed(s, memoryview(b""), rec)  # the frame's end, if it was its last byte
            rec.streamed += stream[pos : pos + passed]  # where the socket code sent them, in the stream's order
            pos += passed
            passes += 1
    assert passes > 10
    assert rec.ends == list(range(40))
    assert rec.frames == [f for i, f in enumerate(frames) if i % 4 == 3]
    assert bytes(rec.streamed) == b"".join(f for i, f in enumerate(frames) if i % 4 != 3)
    assert s.at_frame_boundary and not s.streaming


def test_only_a_streamed_frame_s_rest_can_pass():
    frame_ = requests(1)[0]
    for action in (BUFFER, DROP):
        s = FrameSplitter(lambda b: parse_request_prefix(b, MAX))
        feed(s, memoryview(frame_[:-5]), Recorder(lambda h: action))
        assert s.streaming == 0
        with pytest.raises(ProtocolError):
            s.passed(1)
    s = FrameSplitter(lambda b: parse_request_prefix(b, MAX))
    feed(s, memoryview(frame_[:-5]), Recorder())
    assert s.streaming == 5
    with pytest.raises(ProtocolError):
        s.passed(6)
    s.passed(5)
    assert s.next_event() is END and s.at_frame_boundary


def test_stop_ignores_the_rest():
    frames = requests(5)
    rec = Recorder(lambda h: STOP if h.correlation_id == 2 else STREAM)
    s = FrameSplitter(lambda b: parse_request_prefix(b, MAX))
    feed(s, memoryview(b"".join(frames)), rec)
    assert bytes(rec.streamed) == frames[0] + frames[1]
    assert s.stopped


def test_responses_split_on_correlation_id():
    frames = [frame(struct.pack(">i", i) + b"r" * i) for i in range(20)]
    rec = Recorder()
    feed_in_chunks(FrameSplitter(parse_response_prefix), rec, b"".join(frames), iter(lambda: 5, None))
    assert [h.correlation_id for h in rec.headers] == list(range(20))
    assert bytes(rec.streamed) == b"".join(frames)


@pytest.mark.parametrize(
    "raw",
    [
        struct.pack(">i", -5) + b"xxxx",
        struct.pack(">i", MAX + 1) + b"xxxx",
        struct.pack(">i", 4) + b"\x00\x03\x00\x01",  # shorter than a request header
        struct.pack(">ihhih", 11, 3, 0, 1, 5) + b"a",  # client_id runs past the frame
    ],
)
def test_malformed_frames_raise_protocol_error(raw):
    s, rec = FrameSplitter(lambda b: parse_request_prefix(b, MAX)), Recorder()
    with pytest.raises(ProtocolError):
        for i in range(len(raw)):
            feed(s, memoryview(raw[i : i + 1]), rec)
        feed(s, memoryview(b"\x00" * 64), rec)


def test_a_refused_boundary_stops_the_splitter_and_reports_what_it_consumed():
    """The gate is asked only at a boundary: the frame being read goes on whole, the rest is left."""
    frames = requests(6, seed=5)
    rec = Recorder()
    s = FrameSplitter(lambda b: parse_request_prefix(b, MAX), gated=True)
    rec.action = lambda h: setattr(rec, "paused_at_boundary", h.correlation_id == 1) or STREAM
    stream = b"".join(frames)
    half = len(stream) // 2
    used = feed(s, memoryview(bytearray(stream[:half])), rec, rec)
    assert [h.correlation_id for h in rec.headers] == [0, 1]
    assert used == len(frames[0]) + len(frames[1]) <= half
    assert bytes(rec.streamed) == frames[0] + frames[1]
    rec.paused_at_boundary = False
    rest = stream[used:]
    assert feed(s, memoryview(bytearray(rest)), rec, rec) == len(rest)
    assert [h.correlation_id for h in rec.headers] == list(range(6))
    assert bytes(rec.streamed) == stream
    assert rec.starts == 6


def test_a_refusal_never_splits_a_frame_cut_anywhere():
    """Cut the stream at every byte: a refusal decided at a header never stops the splitter before that frame ends."""
    frames = requests(4, seed=9)
    stream = b"".join(frames)
    for cut in range(1, len(stream)):
        rec = Recorder()
        rec.action = lambda h: setattr(rec, "paused_at_boundary", True) or STREAM
        s = FrameSplitter(lambda b: parse_request_prefix(b, MAX), gated=True)
        used = feed(s, memoryview(bytearray(stream[:cut])), rec, rec)
        used += feed(s, memoryview(bytearray(stream[used:])), rec, rec)
        assert used == len(frames[0]), cut
        assert bytes(rec.streamed) == frames[0]


def test_a_huge_straddling_header_is_parsed_in_linear_time():
    """512 KiB of header tagged fields arriving in 1 KiB reads: parse attempts grow geometrically, not per read."""
    tags = b"".join(bytes([0x80 | (i & 0x7F), (i >> 7) & 0x7F, 0x01, 0x00]) for i in range(1, 131_000))
    count = len(range(1, 131_000))
    head = struct.pack(">hhih", 3, 12, 7, 1) + b"c" + bytes([0x80 | (count & 0x7F), (count >> 7) & 0x7F, count >> 14])
    body = head + tags + b"\x00"  # a (bogus) body byte; only the header matters here
    raw = frame(body)
    calls = []

    def parse(b):
        calls.append(len(b))
        return parse_request_prefix(b, MAX)

    rec = Recorder()
    s = FrameSplitter(parse)
    for i in range(0, len(raw), 1024):
        feed(s, memoryview(bytearray(raw[i : i + 1024])), rec)
    assert [h.correlation_id for h in rec.headers] == [7]
    assert sum(calls) < 4 * len(raw), (len(calls), sum(calls))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(1, 64))
def test_random_bytes_raise_only_protocol_errors(data, chunk):
    s, rec = FrameSplitter(lambda b: parse_request_prefix(b, 4096)), Recorder()
    try:
        for i in range(0, len(data), chunk):
            feed(s, memoryview(bytearray(data[i : i + chunk])), rec)
    except ProtocolError:
        pass


def _pull(s):
    """Every event up to NEED_DATA, acting STREAM on headers: (event, value or header) pairs."""
    out = []
    while (event := s.next_event()) is not NEED_DATA:
        if event is HEADER:
            out.append((event, s.header.correlation_id))
            s.act(STREAM)
        else:
            out.append((event, s.value if event in (SEGMENT, LAST_SEGMENT, FRAME) else None))
    return out


def test_events_of_frames_in_one_chunk_and_across_chunks():
    """One chunk: BOUNDARY, HEADER, LAST_SEGMENT per frame, then NEED_DATA. A frame across chunks: its segments, the
    last one ending it; a prefix straddling chunks comes out as one (copied) segment once parsed."""
    a, b = requests(2, seed=7)
    s = FrameSplitter(lambda buf: parse_request_prefix(buf, MAX), gated=True)
    chunk = memoryview(bytearray(a + b))
    s.receive(chunk)
    events = _pull(s)
    assert [e for e, _ in events] == [BOUNDARY, HEADER, LAST_SEGMENT, BOUNDARY, HEADER, LAST_SEGMENT]
    assert [bytes(v) for e, v in events if e is LAST_SEGMENT] == [a, b]
    assert all(v.obj is chunk.obj for e, v in events if e is LAST_SEGMENT), "a segment is a view, not a copy"
    s.receive(memoryview(b[:6]))  # a prefix cut inside its header
    assert _pull(s) == [(BOUNDARY, None)]
    cut = parse_request_prefix(b, MAX).header_length + 3  # the whole header and a little body
    s.receive(memoryview(b[6:cut]))
    events = _pull(s)
    assert [e for e, _ in events] == [HEADER, SEGMENT] and bytes(events[1][1]) == b[:cut]
    s.receive(memoryview(b[cut:]))
    assert [(e, bytes(v)) for e, v in _pull(s)] == [(LAST_SEGMENT, b[cut:])]
    assert s.at_frame_boundary


def test_buffered_and_dropped_frames_end_with_one_event():
    a, b = requests(2, seed=8)
    s = FrameSplitter(lambda buf: parse_request_prefix(buf, MAX))
    s.receive(memoryview(a + b))
    assert s.next_event() is HEADER
    s.act(BUFFER)
    assert s.next_event() is FRAME and bytes(s.value) == a and s.header.correlation_id == 0
    assert s.next_event() is HEADER
    s.act(DROP)
    assert s.next_event() is END and s.header.correlation_id == 1
    assert s.next_event() is NEED_DATA and s.at_frame_boundary


def test_the_caller_must_act_on_a_header_and_use_a_chunk_before_the_next():
    a, b = requests(2, seed=9)
    s = FrameSplitter(lambda buf: parse_request_prefix(buf, MAX))
    with pytest.raises(SplitterError):
        s.act(STREAM)  # no header waiting
    s.receive(memoryview(a + b))
    assert s.next_event() is HEADER
    with pytest.raises(SplitterError):
        s.next_event()  # the header was not acted on
    s.act(STREAM)
    with pytest.raises(SplitterError):
        s.receive(memoryview(b))  # the first chunk's second frame is still to come


def test_bytes_taken_back_at_a_boundary_are_the_rest_of_the_chunk():
    """The core pauses at a boundary and holds the rest back itself; the splitter then needs data."""
    a, b = requests(2, seed=10)
    s = FrameSplitter(lambda buf: parse_request_prefix(buf, MAX), gated=True)
    s.receive(memoryview(a + b))
    assert [e for e, _ in (_pull_until(s, BOUNDARY, 2))] == [BOUNDARY, HEADER, LAST_SEGMENT, BOUNDARY]
    assert bytes(s.take_rest()) == b
    assert s.next_event() is NEED_DATA and s.at_frame_boundary
    s.receive(memoryview(b))
    assert [e for e, _ in _pull(s)] == [BOUNDARY, HEADER, LAST_SEGMENT]


def _pull_until(s, stop, count):
    out = []
    while True:
        event = s.next_event()
        out.append((event, None))
        if event is HEADER:
            s.act(STREAM)
        if event is stop:
            count -= 1
            if not count:
                return out


def test_a_splitter_that_needs_data_holds_none_of_what_it_was_given():
    """The read buffer is shared by every connection and a buffered frame may be 100 MB: once everything received
    is used, the splitter keeps neither (an idle connection holds no memory), whatever the last frame was."""
    import weakref

    class Chunk(bytearray):  # a bytearray that can be watched
        pass

    for action in (STREAM, BUFFER, DROP):
        a, b = requests(2, seed=11)
        s = FrameSplitter(lambda buf: parse_request_prefix(buf, MAX), gated=True)
        chunk = Chunk(a + b[: len(b) // 2])  # ends inside a frame
        watched = weakref.ref(chunk)
        feed(s, memoryview(chunk), Recorder(lambda h: action))
        del chunk
        assert watched() is None, action
        assert s.value is None
        rest = Chunk(b[len(b) // 2 :])
        watched = weakref.ref(rest)
        feed(s, memoryview(rest), Recorder(lambda h: action))
        del rest
        assert watched() is None and s.value is None, action
