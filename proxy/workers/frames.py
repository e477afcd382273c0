"""The frames between the parent and its workers on their Unix socket: a 4-byte big-endian length of what follows,
one byte of kind, the payload.

A worker's: ``HELLO`` (JSON: its pid and ops port), ``READY`` (why it is not ready, UTF-8; empty when it is),
``USAGE`` (an encoded :class:`quota.sharing.usage_delta.UsageDelta`, passed on by the parent as it is; decoded there only to
sum the workers' usage for the usage topic), ``EAGER`` (empty: one entity's usage is large, the usage topic's
publisher syncs early), ``BEAT`` (empty, every :data:`BEAT_INTERVAL_S`: its loop runs; a worker silent past
``workers.heartbeat.timeout.ms`` is killed and restarted), ``CLAIM`` and ``RELEASE`` (JSON: a connection to count
under the count limits, one that closed; :mod:`proxy.connection.open_gate`), ``CHARGE`` (JSON: a topic this worker saw
created, to be charged by one worker only; :mod:`proxy.cluster.creation_claims`), ``SEED`` (the index of a worker that just
started, a newline, then JSON: this worker's byte-rate sensors' samples; the parent passes it to that worker alone).

The parent's: ``CLAIMED`` (JSON: a claim's answer), ``CHARGED`` (JSON: a charge's: whether this worker claimed the
topic first), ``SEED_ASK`` (a worker's index: it started, send it your
rates), ``GONE`` (a worker's index: it exited, forget its open
connections), ``RESEND`` (a worker started: send it every open count) and ``USAGE`` (the usage topic's peers' usage,
and the silent peers' in fallback, :mod:`proxy.workers.cluster_relay`)."""

from __future__ import annotations

import asyncio
import struct

HELLO, READY, USAGE, EAGER, BEAT = b"H", b"R", b"U", b"E", b"B"  # from a worker (USAGE passed on to the others)
CLAIM, RELEASE, CLAIMED = (
    b"C",
    b"L",
    b"A",
)  # open-connection counts (proxy.connection.open_gate): worker, worker, parent
CHARGE, CHARGED = b"T", b"Y"  # a created topic's charge (proxy.cluster.creation_claims): worker, parent
SEED_ASK, SEED = b"K", b"D"  # parent: send worker <payload> your rates; worker: them (the parent passes them to it)
GONE, RESEND = b"G", b"S"  # from the parent: worker <payload> is gone; a worker started, send your whole state
KINDS = frozenset(
    (HELLO, READY, USAGE, EAGER, BEAT, GONE, RESEND, CLAIM, RELEASE, CLAIMED, CHARGE, CHARGED, SEED_ASK, SEED)
)
BEAT_INTERVAL_S = 0.5  # a worker's heartbeat: at most this long between two frames to the parent
MAX_FRAME_BYTES = 64 * 2**20  # a delta is bounded by one sync's active entities; past this something is wrong
_LENGTH = struct.Struct(">I")


class FrameError(Exception):
    """A frame the other side cannot have meant: the link is closed."""


def pack(kind: bytes, payload: bytes) -> bytes:
    return _LENGTH.pack(len(payload) + 1) + kind + payload


async def read_frame(reader: asyncio.StreamReader) -> tuple[bytes, bytes] | None:
    """The next frame's kind and payload, or None at a clean end of the stream."""
    try:
        head = await reader.readexactly(_LENGTH.size)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise FrameError("the link closed inside a frame's length") from None
        return None
    (length,) = _LENGTH.unpack(head)
    if not 1 <= length <= MAX_FRAME_BYTES:
        raise FrameError(f"frame length {length} outside 1..{MAX_FRAME_BYTES}")
    try:
        body = await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise FrameError("the link closed inside a frame") from None
    kind = body[:1]
    if kind not in KINDS:
        raise FrameError(f"unknown frame kind {kind!r}")
    return kind, body[1:]
