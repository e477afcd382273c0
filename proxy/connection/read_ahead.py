"""Request bytes read past a request frame boundary where reading paused, kept until they may be replayed.

Part of the connection's :class:`~proxy.connection.flow.Flow`, which says when bytes are kept and when they are due
(the reasons at the boundary gone, no back-pressure); the core feeds them again frame by frame, and whatever a
replay did not consume stays kept without a copy. At most one read's worth is ever kept: reading stops while any is.
"""

from __future__ import annotations


class ReadAhead:
    __slots__ = ("data", "_pos")

    def __init__(self) -> None:
        self.data: bytearray | None = None  # the kept bytes (None: none), consumed up to _pos
        self._pos = 0

    @property
    def size(self) -> int:
        """Bytes kept and not yet consumed."""
        return 0 if self.data is None else len(self.data) - self._pos

    def keep(self, data: bytes | bytearray | memoryview) -> None:
        """Keep a copy of ``data`` (the caller checks that nothing is kept yet)."""
        self.data = bytearray(data)
        self._pos = 0

    def view(self) -> memoryview:
        """The bytes not yet consumed, without a copy (the caller checks that some are kept)."""
        return memoryview(self.data or b"")[self._pos :]

    def consumed(self, nbytes: int) -> None:
        """``nbytes`` of :meth:`view` were consumed; once all are, nothing is kept."""
        self._pos += nbytes
        if self.data is not None and self._pos == len(self.data):
            self.drop()

    def drop(self) -> None:
        self.data = None
        self._pos = 0
