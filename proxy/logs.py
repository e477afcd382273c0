"""Log lines that stay cheap whatever clients send: one line per peer and kind of error per interval.

A client that sends a thousand malformed frames a second must not write a thousand log lines: the first error of a
kind from a peer is logged, the next ones within ``interval_s`` are counted, and the next line logged for that peer
says how many were suppressed. Peers are kept in a bounded LRU, so memory does not grow with the addresses seen.
"""

from __future__ import annotations

from collections import OrderedDict


class LogLimiter:
    __slots__ = ("interval_s", "max_peers", "_peers")

    def __init__(self, interval_s: float = 10.0, max_peers: int = 10_000) -> None:
        self.interval_s = interval_s
        self.max_peers = max_peers
        self._peers: OrderedDict[tuple[str, str], list] = OrderedDict()  # (peer, kind) -> [logged at, suppressed]

    def allow(self, peer: str, kind: str, now: float) -> int | None:
        """None: do not log this one (it is counted). Otherwise log it, mentioning the returned number of lines
        suppressed since the last one."""
        key = (peer, kind)
        state = self._peers.get(key)
        if state is not None and now - state[0] < self.interval_s:
            state[1] += 1
            return None
        suppressed = 0 if state is None else state[1]
        self._peers[key] = [now, 0]
        self._peers.move_to_end(key)
        while len(self._peers) > self.max_peers:
            self._peers.popitem(last=False)
        return suppressed
