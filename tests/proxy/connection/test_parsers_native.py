"""The C twin of the core's header parsers (proxy/connection/native/parsers.c) against the closures it wraps
(``proxy.connection.core.request_parser`` and ``response_parser``): in every state of a session (no SASL exchange,
one expecting raw tokens or not, a request limit below the listener's before an authentication), with the internal
topics guarded or not and the producer-id quota switched on and off, every buffer (whole frames of several APIs, each
cut short, sizes past the limits, sizes that cannot be) gives the same header, or the same error, from both. Skipped
where the extension is not built."""

from __future__ import annotations

import itertools

import pytest

from proxy.codec.header import encode_request_header, encode_response_header, frame, parse_response_prefix
from proxy.codec.messages import encode_request, new_request
from proxy.codec.produce_prefix import parse_request_prefix
from proxy.connection import compiled
from proxy.connection.core import request_parser, response_parser
from proxy.session.sasl import SaslExchange
from proxy.session.session import Session
from tests.proxy.codec.builders import record_batch

twin = pytest.importorskip("proxy.connection._native", reason="the C extension is not built here")
compiled.configure(twin)

MAX_REQUEST, MAX_RESPONSE, MAX_HEADER = 100_000, 200_000, 4096


class Pids:
    """The producer-id quota as a parser reads it: whether the table switches it on now."""

    def __init__(self) -> None:
        self.enabled = False


def produce(version: int) -> bytes:
    partition = {"index": 3, "records": record_batch(producer_id=4242, n=3)}
    msg = new_request(
        0,
        version,
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[{"name": "orders", "partition_data": [partition]}],
    )
    return frame(encode_request_header(0, version, 9, "producer-1") + encode_request(0, version, msg))


REQUESTS = [
    produce(3),
    produce(9),
    frame(encode_request_header(1, 12, 5, "consumer") + bytes(40)),
    frame(encode_request_header(3, 12, 6, None) + bytes(3)),
    frame(encode_request_header(18, 3, 7, "c") + bytes(8)),
    frame(encode_request_header(3, 12, 8, "c" * 5000) + bytes(3)),  # a header past the listener's bound
]
RESPONSES = [frame(encode_response_header(1, 12, 5) + bytes(30)), frame(encode_response_header(18, 0, 7) + bytes(6))]
ODD = [b"", b"\x00\x00", (MAX_REQUEST + 1).to_bytes(4, "big") + bytes(20), (-3).to_bytes(4, "big", signed=True)]


def buffers(frames: list[bytes]) -> list[bytes]:
    """Each frame whole and cut after every few bytes, and the odd ones."""
    out = list(ODD)
    for data in frames:
        out += [data[:cut] for cut in range(0, len(data) + 1, 3)] + [data]
    return out


def outcome(parse, buf: bytes):
    try:
        return ("header", parse(buf))
    except Exception as exc:  # noqa: BLE001 (the same error, whatever it is, from both)
        return ("raised", type(exc), str(exc))


def sessions():
    """A session in each state a parser reads."""
    for sasl, limit in itertools.product(["none", "raw", "exchange"], [MAX_REQUEST, 512]):
        session = Session("L", "127.0.0.1")
        session.request_limit = limit
        if sasl != "none":
            session.sasl = SaslExchange()
            if sasl == "raw":
                session.sasl.raw_requests = session.sasl.raw_responses = 1
        yield f"{sasl}/{limit}", session


@pytest.mark.parametrize("internal", [False, True])
def test_the_request_parser_reads_every_buffer_as_the_closure(internal):
    pids = Pids()
    for name, session in sessions():
        closure = request_parser(session, MAX_REQUEST, internal, pids, MAX_HEADER)
        parser = twin.HeaderParser(session, closure, parse_request_prefix, MAX_REQUEST, internal, pids, MAX_HEADER)
        for enabled in (False, True):
            pids.enabled = enabled
            for buf in buffers(REQUESTS):
                assert outcome(parser, buf) == outcome(closure, buf), (name, enabled, buf)


def test_the_response_parser_reads_every_buffer_as_the_closure():
    for name, session in sessions():
        closure = response_parser(session, MAX_RESPONSE)
        parser = twin.HeaderParser(session, closure, parse_response_prefix, MAX_RESPONSE)
        for buf in buffers(RESPONSES):
            assert outcome(parser, buf) == outcome(closure, buf), (name, buf)


def test_the_produce_prefix_is_read_as_the_table_says_now():
    """Not only the same as the closure: the twin reads the quota's switch at each call (a bug shared by both would
    pass the tests above)."""
    session, pids = Session("L", "127.0.0.1"), Pids()
    closure = request_parser(session, MAX_REQUEST, False, pids, MAX_HEADER)
    parser = twin.HeaderParser(session, closure, parse_request_prefix, MAX_REQUEST, False, pids, MAX_HEADER)
    assert parser(REQUESTS[1]).producer_ids == ()
    pids.enabled = True
    assert parser(REQUESTS[1]).producer_ids == (4242,)
