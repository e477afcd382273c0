"""The connections its peers (the other workers of ``workers: N``) have open, as they last said, so that the
open-connection counts (KIP-402's ``max.connections``, per listener, ``max.connections.per.ip``) hold across them.
Pure. A peer sends the absolute counts that changed since its last sync (:mod:`quota.sharing.usage_share`); a peer that is
gone is forgotten at once (its connections went with it). The count kinds are also the parent's
(:mod:`quota.sharing.open_ledger`)."""

from __future__ import annotations

from collections.abc import Iterable

TOTAL, LISTENER, IP = "total", "listener", "ip"
OpenCount = tuple[str, str, int]  # (TOTAL, "", n), (LISTENER, name, n) or (IP, address, n)


class PeerConnections:
    __slots__ = ("_by_peer", "_sums")

    def __init__(self) -> None:
        self._by_peer: dict[str, dict[tuple[str, str], int]] = {}
        self._sums: dict[tuple[str, str], int] = {}

    def update(self, peer: str, counts: Iterable[OpenCount]) -> None:
        """``peer`` now has these counts open (keys it does not name keep their last value)."""
        mine = self._by_peer.setdefault(peer, {})
        for kind, key, n in counts:
            self._add((kind, key), n - mine.get((kind, key), 0))
            if n:
                mine[(kind, key)] = n
            else:
                mine.pop((kind, key), None)

    def forget(self, peer: str) -> None:
        for key, n in self._by_peer.pop(peer, {}).items():
            self._add(key, -n)

    def _add(self, key: tuple[str, str], n: int) -> None:
        total = self._sums.get(key, 0) + n
        if total:
            self._sums[key] = total
        else:
            self._sums.pop(key, None)

    def total(self) -> int:
        return self._sums.get((TOTAL, ""), 0)

    def listener(self, name: str) -> int:
        return self._sums.get((LISTENER, name), 0)

    def ip(self, address: str) -> int:
        return self._sums.get((IP, address), 0)
