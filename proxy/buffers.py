"""Read buffers shared by all connections of one event loop.

asyncio calls ``get_buffer`` and ``buffer_updated`` back to back for one connection, and the proxy forwards
what it read before returning from ``buffer_updated``; so every connection can read into the same buffer and
an idle connection holds none. A transport that could not send everything at once may keep a reference to
the bytes it was given (uvloop does, and CPython's own transports from 3.12 on) instead of copying them: the
connection then calls :meth:`SharedReadBuffer.hand_off` and the buffer is left to that transport while reads
continue into a fresh one.
"""

from __future__ import annotations

READ_BUFFER_SIZE = 1024 * 1024


class SharedReadBuffer:
    __slots__ = ("size", "view")

    def __init__(self, size: int = READ_BUFFER_SIZE) -> None:
        self.size = size
        self.view = memoryview(bytearray(size))

    def hand_off(self) -> None:
        """Leave the current buffer to whoever still references it and read into a new one."""
        self.view = memoryview(bytearray(self.size))
