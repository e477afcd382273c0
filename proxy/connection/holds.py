"""The requests one connection keeps in the proxy until a time (a Produce held for its new producer id).

Part of the connection's :class:`~proxy.connection.flow.Flow`, which counts each among the requests being decided
and stops reading at the next boundary while any is kept. A hold ends one of two ways: its time comes and its
``due`` decides it (:meth:`Holds.due`), or the client leaves first and its ``abandon`` releases what it reserved
(:meth:`Holds.abandon`). No I/O and no clock of its own: times are the connection's (monotonic ns), passed in.
"""

from __future__ import annotations

from collections.abc import Callable


class HeldRequest:
    """A request kept in the proxy until ``until`` (ns): ``due()`` decides it then; ``abandon()`` instead if the
    client leaves first."""

    __slots__ = ("until", "due", "abandon")

    def __init__(self, until: int, due: Callable[[], None], abandon: Callable[[], None]) -> None:
        self.until, self.due, self.abandon = until, due, abandon


class Holds:
    """The held requests of one connection, in the order they were made."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: list[HeldRequest] = []

    def __len__(self) -> int:
        return len(self._held)

    def add(self, until: int, due: Callable[[], None], abandon: Callable[[], None]) -> None:
        self._held.append(HeldRequest(until, due, abandon))

    def earliest(self) -> int:
        """When the first hold ends (ns), or 0 if none is kept."""
        return min((hold.until for hold in self._held), default=0)

    def latest(self) -> int:
        """When the last hold ends (ns), or 0 if none is kept."""
        return max((hold.until for hold in self._held), default=0)

    def due(self, now: int) -> list[HeldRequest]:
        """The holds whose time has come by ``now``, in the order they were made; they are no longer kept."""
        if not self._held or self.earliest() > now:
            return []
        due = [hold for hold in self._held if hold.until <= now]
        self._held = [hold for hold in self._held if hold.until > now]
        return due

    def abandon(self) -> list[HeldRequest]:
        """Every hold, never decided (the client left; the caller abandons them); none is kept."""
        held, self._held = self._held, []
        return held
