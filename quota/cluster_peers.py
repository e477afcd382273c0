"""Which other sidecars count under ``quota.scope: cluster`` in sidecar mode (issue 26), and the share a sidecar
keeps while none of them does. Pure: times are passed in (wall milliseconds: records cross hosts).

Every sidecar publishes, each ``quota.cluster.sync.ms``, one record keyed by its id whose value is a
:class:`~quota.usage_delta.UsageDelta` of what its own clients used since its last sync, and follows the usage
topic. :class:`ClusterPeers` decides what to do with what it reads:

* its own records are skipped; a peer's record older than ``stale_ms`` (by the record's timestamp) is not
  recorded (the compacted topic's old records, read again at start-up, are history, not usage now);
* a peer is *fresh* while its last record is at most ``stale_ms`` old; a peer that stops publishing (dead, or on
  the far side of a network split) stops counting once its last record is older than that;
* while no peer is fresh, the sidecar cannot see the others' usage and keeps to its per-broker share,
  quota / live sidecars known (the peers ever seen on the topic, plus itself; at least 1). It does so without a
  second quota table: :func:`fallback_delta` turns its own usage since the last sync into the usage of its
  ``known - 1`` unseen peers, assumed to use as much as it does, which the sidecar records as remote usage: its
  own clients then get ``quota / known``. A split can therefore neither give a tenant more than N x its quota
  (each side keeps at most its share, or the quota with a fresh peer's usage counted) nor throttle it to zero.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from quota.usage_delta import UsageDelta


@dataclass(frozen=True, slots=True)
class PeerView:
    """What one look at the peers says (:meth:`ClusterPeers.view`)."""

    fresh: int  # peers whose last record is at most stale_ms old
    known: int  # peers ever seen on the topic
    fallback: bool  # no fresh peer, though peers are known: keep to the per-broker share

    @property
    def share_divisor(self) -> int:
        """The live sidecars known, this one included (at least 1): the quota is divided by this in fallback."""
        return self.known + 1


class ClusterPeers:
    """The other sidecars publishing to the usage topic, by id, with their last record's time."""

    __slots__ = ("own_id", "stale_ms", "_last")

    def __init__(self, own_id: str, stale_ms: int) -> None:
        if stale_ms <= 0:
            raise ValueError(f"stale_ms must be positive, got {stale_ms}")
        self.own_id = own_id
        self.stale_ms = stale_ms
        self._last: dict[str, int] = {}  # peer id -> its newest record's timestamp (ms)

    def accept(self, source: str, stamp_ms: int, now_ms: int) -> bool:
        """A record of ``source`` dated ``stamp_ms`` read at ``now_ms``: whether its usage is to be recorded as
        remote usage (not this sidecar's own, not stale). Every peer's record makes it known."""
        if source == self.own_id:
            return False
        if stamp_ms > self._last.get(source, -1):
            self._last[source] = stamp_ms
        return now_ms - stamp_ms <= self.stale_ms

    def forget(self, source: str) -> None:
        """A peer that left for good (its key deleted from the topic): no longer known."""
        self._last.pop(source, None)

    def view(self, now_ms: int) -> PeerView:
        fresh = sum(1 for stamp in self._last.values() if now_ms - stamp <= self.stale_ms)
        known = len(self._last)
        return PeerView(fresh=fresh, known=known, fallback=known > 0 and fresh == 0)

    def stale_peers(self, now_ms: int) -> list[str]:
        return sorted(peer for peer, stamp in self._last.items() if now_ms - stamp > self.stale_ms)


def fallback_delta(own: UsageDelta, unseen: int) -> UsageDelta:
    """The usage ``unseen`` silent peers are assumed to have had while this sidecar recorded ``own``: each byte
    rate, mutation token and new producer id count times ``unseen`` (no ids: they are not the peers' own), and no
    connection counts. Empty when ``unseen`` is 0."""
    if unseen <= 0:
        return UsageDelta(source=own.source, scope=own.scope)

    def scaled(entries):
        return tuple((user, client_id, value * unseen) for user, client_id, value in entries)

    return replace(own, produce=scaled(own.produce), fetch=scaled(own.fetch), mutations=scaled(own.mutations),
                   producer_ids=tuple((user, count * unseen, ()) for user, count, _ in own.producer_ids),
                   listeners=(), ips=(), open_connections=())
