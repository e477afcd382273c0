"""Splitting a byte stream into Kafka frames, without I/O and without copying frame bodies: a pull parser.

A :class:`FrameSplitter` is given the bytes a read brought (:meth:`FrameSplitter.receive`) and hands out what they
hold one event at a time (:meth:`FrameSplitter.next_event`, as h11's ``next_event()``); the caller acts on each
event before it pulls the next, so nothing is called back from inside the parser. The events are constants (no
object is made per event); what goes with one is on the splitter: :attr:`~FrameSplitter.header` (the current
frame's, from ``HEADER`` to ``END``) and :attr:`~FrameSplitter.value` (a segment's bytes, a whole frame).

- ``BOUNDARY`` (a splitter made with ``gated=True`` only): the next frame's first byte is here. The caller decides
  whether it starts: pull again to start it, or take the bytes back with :meth:`FrameSplitter.take_rest` (the
  connection pauses at this boundary and holds them back until it reads on).
- ``HEADER``: the frame's prefix (its size and header) is parsed. The caller must say what to do with the frame,
  :meth:`FrameSplitter.act`, before pulling again:

  - ``STREAM``: every byte of the frame comes out as ``SEGMENT`` events, memoryview slices of the chunks it arrives
    in, the last as ``LAST_SEGMENT`` (the frame ends with it). Only a prefix that straddles two chunks is copied
    (it is a few dozen bytes). The caller may also move the rest of a streamed frame itself and say so with
    :meth:`FrameSplitter.passed` (the socket code splices it in the kernel); ``END`` follows its last byte.
  - ``BUFFER``: the whole frame is collected and comes out once, as a ``FRAME`` event (a bytearray the caller may
    keep; the frame ends with it), for APIs the proxy decodes or rewrites.
  - ``DROP``: the frame is discarded (a response to an ``acks=0`` Produce that should never have been sent); ``END``
    follows its last byte.
  - ``STOP``: stop splitting; everything received and to come is ignored.
- ``NEED_DATA``: everything received is used; :meth:`FrameSplitter.receive` the next chunk.

So every frame ends with exactly one of ``LAST_SEGMENT``, ``FRAME`` or ``END`` (one event, not two, on the hot
path).

Bytes that cannot be a frame raise :class:`ProtocolError`. A header that straddles chunks is gathered in steps
that double, so parsing it costs time linear in its size however it is cut.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from proxy.codec.accel import NATIVE, choose
from proxy.codec.errors import ProtocolError
from proxy.codec.header import Incomplete

_INT32 = struct.Struct(">i")
_PREFIX_STEP = 512  # bytes copied at a time while a straddling prefix is incomplete
_NOTHING = memoryview(b"")


class Action(enum.Enum):
    STREAM = "stream"
    BUFFER = "buffer"
    DROP = "drop"
    STOP = "stop"


STREAM, BUFFER, DROP, STOP = Action.STREAM, Action.BUFFER, Action.DROP, Action.STOP


class Event(enum.Enum):
    NEED_DATA = "need data"
    BOUNDARY = "boundary"
    HEADER = "header"
    SEGMENT = "segment"
    LAST_SEGMENT = "last segment"
    FRAME = "frame"
    END = "end"


NEED_DATA, BOUNDARY, HEADER, SEGMENT, LAST_SEGMENT, FRAME, END = (
    Event.NEED_DATA,
    Event.BOUNDARY,
    Event.HEADER,
    Event.SEGMENT,
    Event.LAST_SEGMENT,
    Event.FRAME,
    Event.END,
)


class SplitterError(RuntimeError):
    """The caller broke the splitter's protocol (pulled before acting on a header, received before the last chunk
    was used): a bug in the caller, never a peer's doing."""


# Where the splitter is (plain ints: compared on every pull).
_IDLE = 0  # at a frame boundary (the next frame not started)
_PREFIX = 1  # a frame started whose prefix straddles chunks: gathering it
_ACTING = 2  # HEADER handed out: waiting for act()
_HEAD = 3  # STREAM of a straddling prefix: the prefix is the next SEGMENT
_BODY = 4  # in the frame, bytes of it to come
_WHOLE = 5  # a BUFFER frame complete: FRAME is next
_END = 6  # the frame's last byte has passed (passed()): END is next
_STOPPED = 7
_COPIED = 8  # a BUFFER frame that came whole in one chunk, copied at its header into value: FRAME is next


class PureFrameSplitter:
    """Incremental frame splitter for one direction of one connection (:data:`FrameSplitter`: this class, or the C
    extension's mirror of it)."""

    __slots__ = (
        "_parse",
        "_gated",
        "_data",
        "_pos",
        "_n",
        "_pending",
        "_remaining",
        "_action",
        "header",
        "value",
        "_state",
        "_allowed",
        "_parse_at",
    )

    def __init__(self, parse_prefix: Callable[[Any], Any], *, gated: bool = False) -> None:
        self._parse = parse_prefix  # the header it returns has a ``size``: the frame's bytes after its 4 size bytes
        self._gated = gated  # hand out BOUNDARY before each frame: the caller decides whether it starts
        self._data: memoryview = _NOTHING  # the chunk received last, until it is used up
        self._pos = 0  # how far into it the splitter is
        self._n = 0  # its length
        self._pending = bytearray()  # prefix straddling chunks, or a whole BUFFER frame
        self._remaining = 0  # bytes of the current frame not yet seen
        self._action = STREAM
        self.header: Any = None  # the current frame's header (from HEADER to END)
        self.value: Any = None  # what the last SEGMENT or FRAME event handed out
        self._state = _IDLE
        self._allowed = False  # BOUNDARY was handed out and the caller pulled again: the frame starts
        self._parse_at = 0  # a straddling prefix is parsed again only once it has this many bytes

    @property
    def stopped(self) -> bool:
        return self._state == _STOPPED

    @property
    def remaining(self) -> int:
        """Bytes of the current frame not yet seen (0 at a boundary or while its prefix is incomplete)."""
        return self._remaining

    @property
    def at_frame_boundary(self) -> bool:
        """Between frames (or stopped): no frame started and not ended."""
        return self._state == _IDLE or self._state == _STOPPED

    @property
    def streaming(self) -> int:
        """Bytes of the current ``STREAM`` frame not yet seen, once every byte received has been handed out (0
        otherwise, at a boundary, or for a frame not streamed): what the caller may pass on by other means and
        report with :meth:`passed`."""
        if self._state == _BODY and self._action is STREAM and self._pos == self._n:
            return self._remaining
        return 0

    def passed(self, nbytes: int) -> None:
        """``nbytes`` of the current ``STREAM`` frame went to their destination without being received here (the
        caller moved them between the sockets itself); once its last byte has passed, ``END`` is next."""
        if nbytes < 0 or nbytes > self.streaming:
            raise ProtocolError(f"{nbytes} bytes passed with {self.streaming} of a streamed frame to come")
        if not nbytes:
            return
        self._remaining -= nbytes
        if not self._remaining:
            self._state = _END

    def close(self) -> None:
        """Nothing more is split; anything pending is dropped."""
        self._state = _STOPPED
        self._pending = bytearray()
        self._data = _NOTHING
        self._pos = self._n = self._remaining = 0
        self.header = self.value = None

    def receive(self, data: memoryview) -> None:
        """The next chunk: pull its events with :meth:`next_event` until ``NEED_DATA``."""
        if self._pos < self._n:
            raise SplitterError("bytes received before the last chunk was used")
        self._data = data
        self._pos = 0
        self._n = len(data)

    def take_rest(self) -> memoryview:
        """At a ``BOUNDARY``: the bytes received and not split, given back (the caller holds them); ``NEED_DATA``
        is next."""
        if self._state != _IDLE:
            raise SplitterError("bytes taken back in the middle of a frame")
        rest = self._data[self._pos :]
        self._pos = self._n
        self._allowed = False
        self._used_up()
        return rest

    def act(self, action: Action) -> None:
        """What to do with the frame whose ``HEADER`` was just handed out."""
        if self._state != _ACTING:
            raise SplitterError("an action given with no header waiting for one")
        if action is STOP:
            self.close()
            return
        self._action = action
        length = self.header.size + 4  # its frame_length (a property: a call)
        pending = self._pending
        if pending:  # the prefix straddled chunks: those bytes are here, not in the chunk
            self._remaining = remaining = length - len(pending)
            if action is STREAM:
                self._pending = bytearray()
                self.value = pending
                self._state = _HEAD
                return
            if action is DROP:
                pending.clear()
        elif action is BUFFER and self._pos + length <= self._n:  # the whole frame is here: one copy, FRAME next
            pos = self._pos
            self.value = bytearray(self._data[pos : pos + length])
            self._pos = pos + length
            self._state = _COPIED
            return
        else:
            self._remaining = remaining = length
        self._state = _BODY if remaining else _WHOLE if action is BUFFER else _END

    def next_event(self) -> Event:
        """The next event of what was received (module doc)."""
        state = self._state
        if state == _IDLE:
            if self._pos == self._n:  # as _used_up, inline
                self._data = _NOTHING
                self.value = None
                return NEED_DATA
            if self._gated and not self._allowed:
                self._allowed = True
                return BOUNDARY
            self._allowed = False
            try:  # the common case, the whole prefix in this chunk, inline; a straddling one in _straddled
                header = self._parse(self._data[self._pos :])
            except Incomplete:
                self.header = None
                return self._straddled()
            self.header = header
            self._state = _ACTING
            return HEADER
        if state == _COPIED:
            self._state = _IDLE
            return FRAME
        if state == _BODY:
            pos = self._pos
            n = self._n
            if pos == n:  # everything received is used: hold on to none of it (_used_up, inline: the hot path)
                self._data = _NOTHING
                self.value = None
                return NEED_DATA
            remaining = self._remaining
            end = pos + remaining if remaining < n - pos else n
            self._pos = end
            self._remaining = remaining = remaining - (end - pos)
            action = self._action
            if action is STREAM:
                self.value = self._data[pos:end]
                if remaining:
                    return SEGMENT
                self._state = _IDLE
                return LAST_SEGMENT
            if remaining:
                if action is BUFFER:
                    self._pending += self._data[pos:end]
                return self._used_up()  # the whole chunk was this frame's
            self._state = _IDLE
            if action is BUFFER:
                self._pending += self._data[pos:end]
                return self._whole()
            return END
        if state == _END:
            self._state = _IDLE
            return END
        if state == _HEAD:
            if self._remaining:
                self._state = _BODY
                return SEGMENT
            self._state = _IDLE
            return LAST_SEGMENT
        if state == _WHOLE:
            self._state = _IDLE
            return self._whole()
        if state == _PREFIX:
            return self._straddled()
        if state == _ACTING:
            raise SplitterError("pulled again before the header was acted on")
        self._pos = self._n  # stopped: what was received is ignored
        return self._used_up()

    def _used_up(self) -> Event:
        """Everything received is used: hold on to none of it (a read buffer shared by every connection, a buffered
        frame of up to the bound), so an idle connection keeps no memory."""
        self._data = _NOTHING
        self.value = None
        return NEED_DATA

    def _whole(self) -> Event:
        self.value = self._pending
        self._pending = bytearray()
        return FRAME

    def _straddled(self) -> Event:
        """The prefix of the frame starting here did not parse from what this chunk holds: gather it across chunks
        (parsed again only each time it has doubled: linear in the header's size); HEADER once it parses."""
        data, pos, n = self._data, self._pos, self._n
        pending = self._pending
        if not pending:  # everything available was tried: keep it all (up to the frame's end) and wait for more
            take = n - pos
            if take >= 4:
                take = min(take, _INT32.unpack_from(data, pos)[0] + 4)
            pending += data[pos : pos + take]
            pos += take
            if self._whole_frame(pending):
                raise ProtocolError("frame ends inside its header")
            self._parse_at = 2 * len(pending)
        while True:
            if pos == n:
                self._pos = pos
                self._state = _PREFIX
                return self._used_up()
            take = self._prefix_room(pending, n - pos)
            pending += data[pos : pos + take]
            pos += take
            if len(pending) < self._parse_at and not self._whole_frame(pending):
                continue
            try:
                header = self._parse(pending)
            except Incomplete:
                if self._whole_frame(pending):
                    raise ProtocolError("frame ends inside its header") from None
                self._parse_at = 2 * len(pending)
                continue
            self._parse_at = 0
            self._pos = pos
            self.header = header
            self._state = _ACTING
            return HEADER

    @staticmethod
    def _whole_frame(pending: bytearray) -> bool:
        return len(pending) >= 4 and len(pending) >= _INT32.unpack_from(pending, 0)[0] + 4

    @staticmethod
    def _prefix_room(pending: bytearray, available: int) -> int:
        """How many more bytes may join a straddling prefix without reaching into the next frame."""
        have = len(pending)
        if have < 4:
            return min(4 - have, available)
        size: int = _INT32.unpack_from(pending, 0)[0]
        # Doubling steps: a header of n bytes is parsed O(log n) times over at most 2n bytes, linear in total.
        return max(0, min(size + 4 - have, available, max(_PREFIX_STEP, have)))


if NATIVE is not None:
    NATIVE.configure_splitter(
        (NEED_DATA, BOUNDARY, HEADER, SEGMENT, LAST_SEGMENT, FRAME, END),
        (STREAM, BUFFER, DROP, STOP),
        SplitterError,
        _NOTHING,
    )
if TYPE_CHECKING:
    FrameSplitter = PureFrameSplitter
else:
    # the C extension's FrameSplitter where it is built (proxy/codec/native/splitter.c: the same events, values and
    # errors, state for state), this class otherwise
    FrameSplitter = choose("FrameSplitter", PureFrameSplitter)
