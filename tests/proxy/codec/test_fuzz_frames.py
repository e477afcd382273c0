"""Mutated and truncated real frames through the whole codec, as the atheris target sees them (``make fuzz``).

The seeds are request frames as kafka-python encodes them and a filled frame of every (API key, direction,
version) the codec decodes (:mod:`tests.fuzz.frames`). Each example takes one or two of them, mutates them
(truncation, bit flips, bytes inserted or deleted, a size prefix or length field overwritten, two frames spliced)
and runs the result through :func:`tests.fuzz.codec_driver.drive`: both frame splitters fed whole and in chunks,
the header parsers, the decoder of a chosen API version and what the proxy decides on a decoded request. Only
ProtocolError may come out. ``test_roundtrip_and_malformed.py`` mutates bodies alone; this file mutates whole
frames and streams of them.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.codec_driver import TARGETS, drive, encode_input
from tests.fuzz.frames import client_frames, schema_frames, seed_inputs

_SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))


def test_every_seed_passes_cleanly():
    """Unmutated, every seed decodes, re-encodes and gets an error answer without tripping the driver."""
    for seed in seed_inputs():
        drive(seed)


@st.composite
def mutated(draw, frame: bytes) -> bytes:
    data = bytearray(frame)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "int32", "int16", "byte"]))
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        if kind == "truncate":
            del data[at:]
        elif kind == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 8))]
        elif kind == "byte":
            data[at] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF]))
        else:  # a length, count or size overwritten with an edge value
            fmt, values = (">i", [-1, 0, 1, 2**31 - 1, -(2**31)]) if kind == "int32" else (">h", [-1, 0, 1, 2**15 - 1])
            if at + struct.calcsize(fmt) <= len(data):
                struct.pack_into(fmt, data, at, draw(st.sampled_from(values)))
    return bytes(data)


# built when a test first draws one, not at collection (0.45 CPU-s, paid by every pytest-xdist worker)
_SEED = st.deferred(lambda: st.sampled_from(client_frames() + schema_frames()))


@_SETTINGS
@given(seed=_SEED, data=st.data(), chunk=st.sampled_from([0, 1, 3, 7, 64]))
def test_a_mutated_frame_raises_only_protocol_error(seed, data, chunk):
    target, whole = seed
    drive(encode_input(target, chunk, data.draw(mutated(whole))))


@_SETTINGS
@given(seed=_SEED, cut=st.integers(0, 10_000), chunk=st.sampled_from([0, 1, 5, 13]))
def test_a_truncated_frame_raises_only_protocol_error(seed, cut, chunk):
    target, whole = seed
    drive(encode_input(target, chunk, whole[: cut % max(len(whole), 1)]))


@_SETTINGS
@given(first=_SEED, second=_SEED, data=st.data(), chunk=st.sampled_from([0, 2, 9]))
def test_a_stream_of_real_and_mutated_frames_raises_only_protocol_error(first, second, data, chunk):
    """A good frame, then a mutated one, then the good one again, fed whole and in chunks: the splitters agree on
    every frame up to where the stream breaks, and nothing but ProtocolError comes out."""
    (target, a), (_, b) = first, second
    stream = a + data.draw(mutated(b)) + a
    drive(encode_input(target, chunk, stream))


@pytest.mark.parametrize("target", [TARGETS[0], TARGETS[-1]])
def test_the_selector_wraps_around(target):
    drive(encode_input(target, 0, b""))
    drive(b"\xff\xff\x00" + b"\x00" * 8)
