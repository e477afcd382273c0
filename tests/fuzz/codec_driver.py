"""One fuzz input through every part of the codec, as the proxy uses it; shared by the atheris target
(``fuzz_codec.py``), the Hypothesis tests and the regression tests.

An input is ``selector (2 bytes) | chunk (1 byte) | payload``. The selector picks one (api key, direction,
version) of the codec's tables; chunk 0 feeds the payload to the splitters whole, n > 0 in n-byte pieces. Each
input goes through:

1. the request splitter (``FrameSplitter`` + ``parse_request_prefix`` with producer ids asked for), its events
   pulled by :func:`feed` as the connection core pulls them, with a gate that refuses some boundaries (the caller
   resumes, as the proxy replays held bytes) and each frame streamed, buffered, dropped or stopping the splitter
   depending on its correlation id; every buffered frame of a decoded
   API is decoded as the proxy would (``decode_request`` at the header's own version), then the decisions made on
   it checked;
2. the response splitter (``parse_response_prefix``), each frame decoded as a response of the selected API version
   (``response_header_length``, ``decode_response`` / ``decode_api_versions_response``);
3. the payload as a body of the selected API version, and as a ``records`` field;
4. the header parsers directly.

Expected: :class:`ProtocolError` (the codec's one error, ``proxy/codec/errors.py``) and, from the header parsers
called directly, :class:`Incomplete` ("feed more bytes", their documented answer to a short buffer). Anything else
escaping, or a broken invariant (an ``AssertionError`` raised here), is a crash:

- a frame delivered whole is exactly ``frame_length`` bytes, a streamed one adds up to that;
- feeding the same bytes whole or in chunks gives the same headers, frames and outcome (when the input ends
  inside a frame, the chunked run may be one header behind: a straddling header is parsed again only once its
  bytes have doubled);
- a message that decodes re-encodes to bytes that decode to the same message (one canonical round trip);
- Produce: the ``acks`` and producer id read from the prefix agree with the fully decoded body;
- the proxy's own error answer to any decoded request encodes, and decodes back as a response to it.
"""

from __future__ import annotations

import struct

from proxy.cluster.topics import Topics
from proxy.codec import messages as M
from proxy.codec import schema
from proxy.codec.apis import API_VERSIONS, FETCH, METADATA, PRODUCE
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
)
from proxy.codec.header import Incomplete, parse_request_header, parse_response_prefix, response_header_length
from proxy.codec.produce_prefix import parse_request_prefix
from proxy.codec.records import fetch_records_summary, iter_batches, produce_records_summary
from proxy.codec.responses import encode_local_response, error_response

MAX_FRAME = 1 << 20
_UNKNOWN_SERVER_ERROR = -1
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")

#: every (api_key, direction, version) in the codec's tables.
TARGETS: list[tuple[int, str, int]] = [
    (key, direction, version)
    for direction in ("request", "response")
    for key, (lo, hi) in sorted(schema.decoded_ranges(direction).items())
    for version in range(lo, hi + 1)
]
_DECODED_REQUESTS = schema.decoded_ranges("request")


def encode_input(target: tuple[int, str, int], chunk: int, payload: bytes) -> bytes:
    return TARGETS.index(target).to_bytes(2, "big") + bytes([chunk]) + payload


def drive(data: bytes) -> None:
    """Run one input through the codec; raise only for a crash (see the module docstring)."""
    if len(data) < 3:
        return
    api_key, direction, version = TARGETS[int.from_bytes(data[:2], "big") % len(TARGETS)]
    chunk = data[2]
    payload = data[3:]
    _compare_chunkings(_split_requests, payload, chunk)
    _compare_chunkings(lambda p, c: _split_responses(p, c, api_key, version), payload, chunk)
    _decode_body(api_key, direction, version, payload)
    _records(payload)
    _prefixes(payload)


# -- splitting ----------------------------------------------------------------------------------------------


class _Recorder:
    """Handler and gate of a splitter: records what it is told, picks an action per frame, refuses every third
    boundary once."""

    def __init__(self, on_buffered) -> None:
        self.events: list = []
        self.on_buffered = on_buffered
        self.boundaries = 0
        self.refused = False
        self.streamed = 0

    def start_frame(self) -> bool:
        self.boundaries += 1
        if self.boundaries % 3 == 0 and not self.refused:
            self.refused = True
            return False
        self.refused = False
        return True

    def on_header(self, header):
        cid = header.correlation_id
        action = STOP if cid % 31 == 30 else (STREAM, BUFFER, DROP, BUFFER)[cid & 3]
        self.events.append(("header", header, action))
        self.streamed = 0
        return action

    def on_segment(self, view) -> None:
        self.streamed += len(view)

    def on_frame(self, header, frame: bytearray) -> None:
        assert len(frame) == header.frame_length, (len(frame), header)
        self.events.append(("frame", bytes(frame)))
        self.on_buffered(header, frame)

    def on_frame_end(self, header) -> None:
        action = self.events[-1][2] if self.events[-1][0] == "header" else BUFFER
        if action is STREAM:
            assert self.streamed == header.frame_length, (self.streamed, header)
        self.events.append(("end", header.correlation_id))


def feed(splitter: FrameSplitter, data, handler, gate=None) -> int:
    """Give ``data`` to ``splitter`` and pull its events as the connection core does, handing them to ``handler``
    (``on_header(header) -> Action``, ``on_segment(view)``, ``on_frame(header, frame)``, ``on_frame_end(header)``);
    at a boundary ``gate.start_frame()`` decides (no gate: every frame starts). Returns the bytes used: fewer than
    ``len(data)`` when the gate refused a boundary."""
    splitter.receive(data)
    while True:
        event = splitter.next_event()
        if event is NEED_DATA:
            return len(data)
        if event is BOUNDARY:
            if gate is not None and not gate.start_frame():
                return len(data) - len(splitter.take_rest())
        elif event is HEADER:
            splitter.act(handler.on_header(splitter.header))
        elif event is SEGMENT:
            handler.on_segment(splitter.value)
        elif event is LAST_SEGMENT:
            handler.on_segment(splitter.value)
            handler.on_frame_end(splitter.header)
        elif event is FRAME:
            handler.on_frame(splitter.header, splitter.value)
            handler.on_frame_end(splitter.header)
        else:
            assert event is END, event
            handler.on_frame_end(splitter.header)


def _feed(splitter: FrameSplitter, payload: bytes, chunk: int, recorder) -> None:
    view = memoryview(payload)
    step = chunk or len(payload) or 1
    for start in range(0, len(payload), step):
        piece = view[start : start + step]
        while piece and not splitter.stopped:
            used = feed(splitter, piece, recorder, recorder)
            assert 0 <= used <= len(piece)
            piece = piece[used:]  # a refused boundary: the proxy replays the rest later, so do we


def _compare_chunkings(split, payload: bytes, chunk: int) -> None:
    whole = split(payload, 0)
    if not chunk:
        return
    pieces = split(payload, chunk)
    if pieces != whole:
        # A header that straddles chunks is parsed again only once its bytes have doubled or the frame is whole
        # (linear cost, by design): when the input ends inside a frame, the chunked run may lag one header behind.
        events, at_boundary = pieces
        lagging = at_boundary is False and events == whole[0][: len(events)]
        assert lagging, f"whole and {chunk}-byte chunks differ:\n{whole}\n{pieces}"


def _split_requests(payload: bytes, chunk: int) -> tuple:
    recorder = _Recorder(_check_request)
    splitter = FrameSplitter(lambda buf: parse_request_prefix(buf, MAX_FRAME, True), gated=True)
    try:
        _feed(splitter, payload, chunk, recorder)
    except ProtocolError:
        return recorder.events, "error"
    return recorder.events, splitter.at_frame_boundary


def _split_responses(payload: bytes, chunk: int, api_key: int, version: int) -> tuple:
    recorder = _Recorder(lambda header, frame: _check_response_frame(api_key, version, frame))
    splitter = FrameSplitter(lambda buf: parse_response_prefix(buf, MAX_FRAME), gated=True)
    try:
        _feed(splitter, payload, chunk, recorder)
    except ProtocolError:
        return recorder.events, "error"
    return recorder.events, splitter.at_frame_boundary


# -- what the proxy does with a whole frame ---------------------------------------------------------------


def _check_request(header, frame: bytearray) -> None:
    lo_hi = _DECODED_REQUESTS.get(header.api_key)
    if lo_hi is None or not lo_hi[0] <= header.api_version <= lo_hi[1]:
        return
    body = memoryview(frame)[header.header_length :]
    try:
        msg = M.decode_request(header.api_key, header.api_version, body)
    except ProtocolError:
        return
    if header.api_key == PRODUCE:
        assert header.acks == msg.acks, (header.acks, msg.acks)
        assert header.producer_ids == _producer_ids(msg), (header.producer_ids, _producer_ids(msg))
    _check_request_message(header.api_key, header.api_version, msg, header.correlation_id)


def _producer_ids(msg) -> tuple[int, ...]:
    """What the prefix parser should read: the distinct producer ids of every well-formed batch of every partition
    (a partition's walk ends at a batch cut short or shorter than any batch)."""
    found: dict[int, None] = {}
    for topic in msg.topic_data:
        for partition in topic.partition_data:
            records, pos = partition.records or b"", 0
            while pos + 51 <= len(records):
                size = _INT32.unpack_from(records, pos + 8)[0]
                magic = records[pos + 16]
                if size < 14 or (magic == 2 and (size < 49 or pos + 12 + size > len(records))):
                    break
                if magic == 2 and _INT64.unpack_from(records, pos + 43)[0] >= 0:
                    found[_INT64.unpack_from(records, pos + 43)[0]] = None
                pos += 12 + size
    return tuple(found)


def _check_request_message(api_key: int, version: int, msg, correlation_id: int) -> None:
    _round_trip(M.encode_request, M.decode_request, api_key, version, msg)
    if api_key == PRODUCE:
        for topic in msg.topic_data:
            for partition in topic.partition_data:
                try:
                    produce_records_summary(partition.records)
                except ProtocolError:
                    pass
    if api_key in M.OWN_REQUESTS_ONLY:
        return  # the proxy never answers these itself (its own requests only): no error response to build
    answer = error_response(api_key, version, msg, _UNKNOWN_SERVER_ERROR)
    whole = encode_local_response(api_key, version, correlation_id, answer)
    head = parse_response_prefix(whole)
    assert head.correlation_id == correlation_id and head.frame_length == len(whole)
    M.decode_response(api_key, version, memoryview(whole)[response_header_length(api_key, version, whole) :])


def _check_response_frame(api_key: int, version: int, frame: bytearray) -> None:
    try:
        start = response_header_length(api_key, version, frame)
    except ProtocolError:
        return
    _decode_response_body(api_key, version, memoryview(frame)[start:])


def _decode_response_body(api_key: int, version: int, body) -> None:
    try:
        if api_key == API_VERSIONS:
            msg = M.decode_api_versions_response(version, body)
            return
        msg = M.decode_response(api_key, version, body)
    except ProtocolError:
        return
    _round_trip(M.encode_response, M.decode_response, api_key, version, msg)
    if api_key == FETCH:
        for topic in msg.responses:
            for partition in topic.partitions:
                try:
                    fetch_records_summary(partition.records)
                except ProtocolError:
                    pass
    elif api_key == METADATA:
        Topics().learn_from_metadata(msg, 0)


def _round_trip(encode, decode, api_key: int, version: int, msg) -> None:
    once = encode(api_key, version, msg)
    again = decode(api_key, version, once)
    assert encode(api_key, version, again) == once, f"{api_key} v{version}: re-encoding is not stable"


def _decode_body(api_key: int, direction: str, version: int, payload: bytes) -> None:
    if direction == "request":
        try:
            msg = M.decode_request(api_key, version, payload)
        except ProtocolError:
            return
        _check_request_message(api_key, version, msg, 7)
    else:
        _decode_response_body(api_key, version, payload)


def _records(payload: bytes) -> None:
    for allow_truncated in (False, True):
        try:
            for _ in iter_batches(payload, allow_truncated=allow_truncated):
                pass
        except ProtocolError:
            pass


def _prefixes(payload: bytes) -> None:
    for parse in (
        lambda b: parse_request_header(b, MAX_FRAME),
        lambda b: parse_request_prefix(b, MAX_FRAME, True),
        lambda b: parse_response_prefix(b, MAX_FRAME),
    ):
        try:
            parse(payload)
        except (ProtocolError, Incomplete):
            pass
