"""Splitting a byte stream into Kafka frames, without I/O and without copying frame bodies.

A :class:`FrameSplitter` is fed chunks as the socket delivers them. At the start of each frame it parses a
prefix (the size and header) and asks its handler what to do with the frame:

- ``STREAM``: hand every byte of the frame on as memoryview slices of the chunks it arrives in. Only a
  prefix that straddles two chunks is copied (it is a few dozen bytes). The caller may also move the rest of a
  streamed frame itself and say so with :meth:`FrameSplitter.passed` (the socket code splices it in the kernel).
- ``BUFFER``: collect the whole frame and deliver it once, for APIs the proxy decodes or rewrites.
- ``DROP``: discard the frame (a response to an ``acks=0`` Produce that should never have been sent).
- ``STOP``: stop splitting; the rest of the chunk and everything after is ignored.

An optional gate is asked ``start_frame()`` before each frame's first byte is taken: False stops the splitter at
that boundary (and :meth:`FrameSplitter.feed` returns how much it consumed), True means the frame has started. Handlers implement ``on_header(header) -> Action``,
``on_segment(view)``, ``on_frame(header, frame)`` and ``on_frame_end(header)``. The splitter raises
:class:`ProtocolError` for bytes that cannot be a frame.

A header that straddles chunks is gathered in steps that double, so parsing it costs time linear in its size
however it is cut.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from typing import Any, Protocol

from proxy.codec.errors import ProtocolError
from proxy.codec.header import Incomplete

_INT32 = struct.Struct(">i")
_PREFIX_STEP = 512  # bytes copied at a time while a straddling prefix is incomplete


class Action(enum.Enum):
    STREAM = "stream"
    BUFFER = "buffer"
    DROP = "drop"
    STOP = "stop"


STREAM, BUFFER, DROP, STOP = Action.STREAM, Action.BUFFER, Action.DROP, Action.STOP


class FrameGate(Protocol):
    def start_frame(self) -> bool: ...


class FrameHandler(Protocol):
    def on_header(self, header: Any) -> Action: ...

    def on_segment(self, view: memoryview | bytearray) -> None: ...

    def on_frame(self, header: Any, frame: bytearray) -> None: ...

    def on_frame_end(self, header: Any) -> None: ...


class FrameSplitter:
    """Incremental frame splitter for one direction of one connection."""

    __slots__ = ("_parse", "_handler", "_gate", "_pending", "_remaining", "_action", "_header", "stopped", "_parse_at")

    def __init__(self, parse_prefix: Callable[[Any], Any], handler: FrameHandler, gate: FrameGate | None = None) -> None:
        self._parse = parse_prefix
        self._handler = handler
        self._gate = gate
        self._pending = bytearray()  # prefix straddling chunks, or a whole BUFFER frame
        self._remaining = 0  # bytes of the current frame not yet seen
        self._action = STREAM
        self._header: Any = None
        self.stopped = False
        self._parse_at = 0  # a straddling prefix is parsed again only once it has this many bytes

    @property
    def remaining(self) -> int:
        """Bytes of the current frame not yet seen (0 at a boundary or while its prefix is incomplete)."""
        return self._remaining

    @property
    def at_frame_boundary(self) -> bool:
        return not self._remaining and not self._pending

    @property
    def streaming(self) -> int:
        """Bytes of the current ``STREAM`` frame not yet seen (0 at a boundary, or for a frame not streamed): what
        the caller may pass on by other means and report with :meth:`passed`."""
        return self._remaining if self._action is STREAM and not self.stopped else 0

    def passed(self, nbytes: int) -> None:
        """``nbytes`` of the current ``STREAM`` frame went to their destination without being fed here (the caller
        moved them between the sockets itself); the frame ends, as if fed, when its last byte has passed."""
        if nbytes < 0 or nbytes > self.streaming:
            raise ProtocolError(f"{nbytes} bytes passed with {self.streaming} of a streamed frame to come")
        if not nbytes:
            return
        self._remaining -= nbytes
        if not self._remaining:
            self._finish_frame()

    def close(self) -> None:
        """Drop the handler (and the cycle it makes with it) and anything pending: nothing more is split."""
        self.stopped = True
        self._handler = self._gate = None
        self._pending = bytearray()

    def feed(self, data: memoryview) -> int:
        """Split ``data``; return how many bytes were consumed. Fewer than ``len(data)`` only when the handler
        gate paused at a boundary or the splitter stopped; the caller keeps the rest."""
        if self.stopped:
            return len(data)
        pos = 0
        n = len(data)
        handler = self._handler
        gate = self._gate
        while pos < n:
            remaining = self._remaining
            if remaining:
                end = pos + remaining if remaining < n - pos else n
                action = self._action
                if action is STREAM:
                    handler.on_segment(data[pos:end])
                elif action is BUFFER:
                    self._pending += data[pos:end]
                self._remaining = remaining - (end - pos)
                pos = end
                if not self._remaining:
                    self._finish_frame()
                    if self.stopped:
                        return n
                continue
            if gate is not None and not self._pending and not gate.start_frame():
                return pos
            pos = self._start_frame(data, pos, n)
            if self.stopped:
                return n
        return pos

    def _start_frame(self, data: memoryview, pos: int, n: int) -> int:
        """Parse the prefix of the frame starting at ``pos``; return the position to continue from."""
        pending = self._pending
        if pending:
            take = self._prefix_room(pending, n - pos)
            pending += data[pos : pos + take]
            pos += take
            if len(pending) < self._parse_at and not self._whole_frame(pending):
                return pos  # not parsed again until it has doubled: linear in the header's size
            buf = pending
        else:
            buf = data[pos:]
        try:
            header = self._parse(buf)
        except Incomplete:
            if buf is not pending:
                # Everything available was tried: keep it all (up to the frame's end) and wait for more.
                take = n - pos
                if take >= 4:
                    take = min(take, _INT32.unpack_from(data, pos)[0] + 4)
                pending += data[pos : pos + take]
                pos += take
            if self._whole_frame(pending):
                raise ProtocolError("frame ends inside its header") from None
            self._parse_at = 2 * len(pending)
            return pos
        self._parse_at = 0
        action = self._handler.on_header(header)
        if action is STOP:
            self.stopped = True
            return n
        self._header = header
        self._action = action
        length = header.frame_length
        if buf is pending:
            self._remaining = length - len(pending)
            if action is STREAM:
                self._pending = bytearray()
                self._handler.on_segment(pending)
            elif action is DROP:
                pending.clear()
        else:
            self._remaining = length
        if not self._remaining:
            self._finish_frame()
        return pos

    @staticmethod
    def _whole_frame(pending: bytearray) -> bool:
        return len(pending) >= 4 and len(pending) >= _INT32.unpack_from(pending, 0)[0] + 4

    @staticmethod
    def _prefix_room(pending: bytearray, available: int) -> int:
        """How many more bytes may join a straddling prefix without reaching into the next frame."""
        have = len(pending)
        if have < 4:
            return min(4 - have, available)
        size = _INT32.unpack_from(pending, 0)[0]
        # Doubling steps: a header of n bytes is parsed O(log n) times over at most 2n bytes, linear in total.
        return max(0, min(size + 4 - have, available, max(_PREFIX_STEP, have)))

    def _finish_frame(self) -> None:
        header = self._header
        action = self._action
        self._header = None
        if action is BUFFER:
            frame = self._pending
            self._pending = bytearray()
            self._handler.on_frame(header, frame)
        elif action is DROP:
            self._pending.clear()
        self._handler.on_frame_end(header)
