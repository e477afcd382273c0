"""The decoded client ids and topic names the C codec keeps (native/common.c's recent_text) against the pure codec:
frames whose client ids and only topics come from a few texts, some of them sharing a slot, some a prefix of
another, non-ASCII ones, ones of 64 and 65 bytes and ones not UTF-8, parsed one after another; each the same value
or error as the pure parse. Skipped where the extension is not built."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.codec import apis, produce_prefix
from proxy.codec.accel import NATIVE
from proxy.codec.messages import encode_request, new_request

pytestmark = pytest.mark.skipif(NATIVE is None, reason="the C extension is not built here (or is switched off)")

SLOTS = 64  # what the C keeps (accel.h): its slot of a text is found as it finds it


def slot(raw: bytes) -> int:
    h = len(raw)
    for byte in raw:
        h = (h * 31 + byte) & 0xFFFFFFFF
    return (h ^ (h >> 16)) % SLOTS


def one_slot(stem: str) -> list[str]:
    """``stem`` and two texts of its slot: one that starts with it, one of its length."""
    same = [stem]
    for extra in (f"{stem}{n}" for n in itertools.count()):
        if slot(extra.encode()) == slot(stem.encode()):
            same.append(extra)
            break
    for other in ("".join(p) for p in itertools.product("abcdefghij", repeat=len(stem))):
        if other != stem and slot(other.encode()) == slot(stem.encode()):
            return [*same, other]
    raise AssertionError("no text of the same length in the slot")


def latin_twin() -> list[bytes]:
    """Two texts of one slot: "Ã©..." (kept, it would be held in one byte a character, C3 A9 ...) and "é..." (whose
    UTF-8 is those bytes): only ASCII texts may be kept, whose characters are their bytes."""
    for n in itertools.count():
        suffix = str(n)
        held, sent = ("\u00c3\u00a9" + suffix).encode(), ("\u00e9" + suffix).encode()
        if slot(held) == slot(sent):
            return [held, sent]
    raise AssertionError("unreachable")


TEXTS = [t.encode() for t in (*one_slot("prod"), *one_slot("orders"), "", "é", "éa", "x" * 64, "y" * 65)]
LATIN = latin_twin()
TEXTS += [b"\xff\xfe", b"ok\xc3", *LATIN]  # not UTF-8; the latin twins


def frame(client_id: bytes, topic: bytes) -> bytes:
    msg = new_request(apis.PRODUCE, 9, acks=-1, timeout_ms=30000, topic_data=[{"name": "t", "partition_data": []}])
    body = bytearray(encode_request(apis.PRODUCE, 9, msg))
    name_at = body.index(b"\x02t")  # the only topic's name, compact: its length + 1, then its bytes
    body[name_at : name_at + 2] = bytes([len(topic) + 1]) + topic
    head = struct.pack(">hhih", apis.PRODUCE, 9, 7, len(client_id)) + client_id + b"\x00"
    return struct.pack(">i", len(head) + len(body)) + head + bytes(body)


def outcome(function, *args):
    try:
        value = function(*args)
    except Exception as exc:  # every error counts: the same class and message from both
        return "raised", type(exc), str(exc)
    return "value", value, type(value.client_id), type(value.only_topic)


def test_the_texts_share_slots_as_drawn():
    assert len({slot(t) for t in TEXTS[:3]}) == 1 and len({slot(t) for t in TEXTS[3:6]}) == 1
    held, sent = LATIN
    assert slot(held) == slot(sent) and held.decode().encode("latin-1") == sent


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.sampled_from(TEXTS), st.sampled_from(TEXTS)), min_size=1, max_size=30))
def test_a_sequence_of_frames_parses_as_the_pure_codec_parses_each(pairs):
    for client_id, topic in pairs:
        buf = frame(client_id, topic)
        got = outcome(NATIVE.parse_request_prefix, buf, 2**31 - 1, True)
        assert got == outcome(produce_prefix.pure_parse_request_prefix, buf, 2**31 - 1, True), (client_id, topic)
