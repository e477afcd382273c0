"""Who is churning producers (KIP-936 attribution, metrics only, not the quota). Pure."""

from __future__ import annotations


class IssuedProducerIds:
    """Who is churning producers: producer ids the broker issued (InitProducerId answers), per (user, client-id,
    IP). Bounded: beyond ``max_entries`` keys the least recently issued one is folded into ``other``."""

    __slots__ = ("max_entries", "_counts", "other")

    def __init__(self, max_entries: int = 1000) -> None:
        self.max_entries = max_entries
        self._counts: dict[tuple[str, str, str], int] = {}  # insertion order = least recently issued first
        self.other = 0

    def record(self, user: str, client_id: str, ip: str) -> None:
        key = (user, client_id, ip)
        count = self._counts.pop(key, 0) + 1
        self._counts[key] = count  # moves to the end: most recently issued
        if len(self._counts) > self.max_entries:
            oldest = next(iter(self._counts))
            self.other += self._counts.pop(oldest)

    def counts(self) -> dict[tuple[str, str, str], int]:
        return dict(self._counts)
