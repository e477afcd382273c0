"""Read buffers shared by all connections of one event loop.

asyncio calls ``get_buffer`` and ``buffer_updated`` back to back for one connection, and the proxy forwards
what it read before returning from ``buffer_updated``; so every connection can read into the same buffer and
an idle connection holds none. A transport that could not send everything at once may keep a reference to
the bytes it was given (uvloop does, and CPython's own transports from 3.12 on) instead of copying them: the
connection then calls :meth:`SharedReadBuffer.hand_off` with how many bytes it read, those bytes are left to
that transport, and reads continue in the rest of the block; a new block is allocated only when little is left.
"""

from __future__ import annotations

READ_BUFFER_SIZE = 1024 * 1024
MIN_READ_BYTES = 256 * 1024  # below this much room a fresh block is taken, so reads stay large


class SharedReadBuffer:
    __slots__ = ("size", "view", "_block", "_start")

    def __init__(self, size: int = READ_BUFFER_SIZE) -> None:
        self.size = size
        self._block = memoryview(bytearray(size))
        self._start = 0
        self.view = self._block

    def hand_off(self, nbytes: int) -> None:
        """Leave the ``nbytes`` just read (at the start of :attr:`view`) to whoever still references them."""
        start = self._start + nbytes
        if self.size - start < min(MIN_READ_BYTES, self.size):
            self._block = memoryview(bytearray(self.size))
            start = 0
        self._start = start
        self.view = self._block[start:]
