"""The parent's one count of every worker's open connections (``workers: N``), so that the open-connection limits
(KIP-402's ``max.connections``, per listener, ``max.connections.per.ip``) hold across the workers exactly. Pure."""

from __future__ import annotations

from quota.primitives.peer_connections import IP, LISTENER, TOTAL


class OpenLedger:
    """The parent's one count of every worker's open connections, so a count limit holds across workers exactly:
    a worker claims each connection it admits before serving it, and releases it when it closes. Pure; the limits
    come with each claim (a worker's configuration, dynamic updates included)."""

    __slots__ = ("_by_worker", "_sums")

    def __init__(self) -> None:
        self._by_worker: dict[str, dict[tuple[str, str], int]] = {}
        self._sums: dict[tuple[str, str], int] = {}

    def claim(
        self, worker: str, listener: str, ip: str, ip_max: int | None, listener_max: int | None, total_max: int | None
    ) -> str | None:
        """One more connection from ``ip`` on ``listener`` for ``worker``: counted and None, or the kind of the
        limit it would pass (``IP``, ``LISTENER``, ``TOTAL``: not counted). ``total_max`` None: not limited (an
        internal listener is exempt from the proxy-wide limit, yet counted)."""
        keys = ((IP, ip), (LISTENER, listener), (TOTAL, ""))
        for key, limit in zip(keys, (ip_max, listener_max, total_max)):
            if limit is not None and self._sums.get(key, 0) >= limit:
                return key[0]
        mine = self._by_worker.setdefault(worker, {})
        for key in keys:
            mine[key] = mine.get(key, 0) + 1
            self._sums[key] = self._sums.get(key, 0) + 1
        return None

    def release(self, worker: str, listener: str, ip: str) -> None:
        """A claimed connection closed; one never claimed (or of a forgotten worker) is ignored."""
        mine = self._by_worker.get(worker)
        if mine is None or mine.get((IP, ip), 0) <= 0:
            return
        for key in ((IP, ip), (LISTENER, listener), (TOTAL, "")):
            _drop(mine, key, 1)
            _drop(self._sums, key, 1)

    def forget(self, worker: str) -> None:
        """``worker`` exited: its connections went with it."""
        for key, n in self._by_worker.pop(worker, {}).items():
            _drop(self._sums, key, n)

    def open(self, kind: str, key: str = "") -> int:
        return self._sums.get((kind, key), 0)


def _drop(counts: dict[tuple[str, str], int], key: tuple[str, str], n: int) -> None:
    left = counts.get(key, 0) - n
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)
