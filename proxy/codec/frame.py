"""Splitting a byte stream into Kafka frames, without I/O and without copying frame bodies.

A :class:`FrameSplitter` is fed chunks as the socket delivers them. At the start of each frame it parses a
prefix (the size and header) and asks its handler what to do with the frame:

- ``STREAM``: hand every byte of the frame on as memoryview slices of the chunks it arrives in. Only a
  prefix that straddles two chunks is copied (it is a few dozen bytes).
- ``BUFFER``: collect the whole frame and deliver it once, for APIs the proxy decodes or rewrites.
- ``DROP``: discard the frame (a response to an ``acks=0`` Produce that should never have been sent).
- ``STOP``: stop splitting; the rest of the chunk and everything after is ignored (connection draining).

Handlers implement ``on_header(header) -> Action``, ``on_segment(view)``, ``on_frame(header, frame)`` and
``on_frame_end(header)``. The splitter raises :class:`ProtocolError` for bytes that cannot be a frame.
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


class FrameHandler(Protocol):
    def on_header(self, header: Any) -> Action: ...

    def on_segment(self, view: memoryview | bytearray) -> None: ...

    def on_frame(self, header: Any, frame: bytearray) -> None: ...

    def on_frame_end(self, header: Any) -> None: ...


class FrameSplitter:
    """Incremental frame splitter for one direction of one connection."""

    __slots__ = ("_parse", "_handler", "_pending", "_remaining", "_action", "_header", "stopped", "_holding", "_backlog")

    def __init__(self, parse_prefix: Callable[[Any], Any], handler: FrameHandler) -> None:
        self._parse = parse_prefix
        self._handler = handler
        self._pending = bytearray()  # prefix straddling chunks, or a whole BUFFER frame
        self._remaining = 0  # bytes of the current frame not yet seen
        self._action = STREAM
        self._header: Any = None
        self.stopped = False
        self._holding = False  # stop at the next frame start and keep the rest for release()
        self._backlog: bytearray | None = None

    @property
    def at_frame_boundary(self) -> bool:
        return not self._remaining and not self._pending

    def hold(self) -> None:
        """Finish the current frame, then keep what follows unsplit until :meth:`release`.

        A throttled client must not get more requests to the broker than one read chunk happened to hold; the
        caller pauses reading too, so the backlog is at most one chunk.
        """
        self._holding = True

    def release(self) -> None:
        self._holding = False
        backlog, self._backlog = self._backlog, None
        if backlog:
            self.feed(memoryview(backlog))

    def feed(self, data: memoryview) -> None:
        if self.stopped:
            return
        if self._backlog is not None:
            self._backlog += data
            return
        pos = 0
        n = len(data)
        handler = self._handler
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
                continue
            if self._holding:
                self._backlog = bytearray(data[pos:])
                return
            pos = self._start_frame(data, pos, n)
            if self.stopped:
                return

    def _start_frame(self, data: memoryview, pos: int, n: int) -> int:
        """Parse the prefix of the frame starting at ``pos``; return the position to continue from."""
        pending = self._pending
        if pending:
            take = self._prefix_room(pending, n - pos)
            pending += data[pos : pos + take]
            pos += take
            buf = pending
        else:
            buf = data[pos:]
        try:
            header = self._parse(buf)
        except Incomplete:
            if buf is not pending:
                take = self._prefix_room(pending, n - pos)
                pending += data[pos : pos + take]
                pos += take
            if len(pending) >= 4 and len(pending) >= _INT32.unpack_from(pending, 0)[0] + 4:
                raise ProtocolError("frame ends inside its header") from None
            return pos
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
    def _prefix_room(pending: bytearray, available: int) -> int:
        """How many more bytes may join a straddling prefix without reaching into the next frame."""
        have = len(pending)
        if have < 4:
            return min(4 - have, available)
        size = _INT32.unpack_from(pending, 0)[0]
        return max(0, min(size + 4 - have, available, _PREFIX_STEP))

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
