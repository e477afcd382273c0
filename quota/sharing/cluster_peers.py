"""Which other sidecars count under ``quota.scope: cluster`` in sidecar mode (issue 26), which of their records are
applied (each exactly once), and the share a sidecar keeps while none of them counts. Pure: times are passed in
(wall milliseconds: records cross hosts).

Every sidecar publishes, each ``quota.cluster.sync.ms``, one record keyed by its id whose value is a
:class:`~quota.sharing.usage_delta.UsageDelta` of what its own clients used since its previous record, numbered
``(incarnation, seq)`` (a random id per start of the sender, then 1, 2, ...), and follows the usage topic.
:class:`ClusterPeers` decides what to do with what it reads (:meth:`ClusterPeers.judge`, then
:meth:`ClusterPeers.first_time`):

* its own records are skipped; a peer's record older than ``stale_ms`` (by the record's timestamp), or dated before
  this sidecar started following (``since_ms``: its start less one sync interval), is not recorded: the topic's
  history is usage its peers have already paid for or are paying back, and recorded at once into a new sidecar's
  full buckets it would leave that sidecar's clients nothing for as long as the others keep the tenant at its quota
  (a sidecar starts with full buckets instead, as a new one does: at most one burst more); one dated more than
  :data:`CLOCK_SKEW_MS` ahead of this host's clock is not taken at all (as the volume follower refuses such a
  snapshot): a peer whose clock runs ahead would otherwise stay fresh for as long as it runs ahead;
* a record whose number was applied already (a replay of the topic after a reconnect, a send retried after a
  timeout that had gone through) is not applied again: per sender's incarnation, the numbers applied, each kept
  while its record could still be fresh (``stale_ms``); the sender sends its records in order, each until it is
  acknowledged or older than ``stale_ms``, so a record it could not send reaches the peers late, not never;
* a peer is *fresh* while its last record is at most ``stale_ms`` old; *known* while its last record is at most
  ``forget_ms`` older than the newest record this sidecar has read from the topic (its own included; never later
  than now): a peer that stopped publishing while others go on (a pod killed, a sidecar restarted under a new id)
  is forgotten, while one this sidecar cannot hear because it is cut off from the topic itself stays known;
* while no peer is fresh, though some are known, the sidecar keeps to its per-broker share, quota / live
  sidecars (the peers known, plus itself). It does so without a second quota table: :func:`fallback_delta` turns
  its own usage since the last sync into the usage of its ``known`` silent peers, assumed to use as much as it
  does, which the sidecar records as remote usage: its own clients then get ``quota / (known + 1)``. A split can
  therefore neither give a tenant more than N x its quota (each side keeps at most its share, or the quota with a
  fresh peer's usage counted) nor throttle it to zero. The peers' records dated while their usage was assumed,
  read once the topic is back, are not recorded over it (:meth:`ClusterPeers.cover`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from quota.managers.volume import CLOCK_SKEW_MS
from quota.sharing.usage_delta import EntityUsage, UsageDelta

OWN, STALE, FUTURE, COVERED, TAKE = "own", "stale", "future", "covered", "take"
PEERS_PER_BROKER = 2  # sidecars one broker may have had on the topic lately: itself, and itself restarted
MIN_PEERS = 4
"""What :meth:`ClusterPeers.judge` says of a record."""


@dataclass(frozen=True, slots=True)
class PeerView:
    """What one look at the peers says (:meth:`ClusterPeers.view`)."""

    fresh: int  # peers whose last record is at most stale_ms old
    known: int  # peers heard from within forget_ms of the newest record read (the live sidecars)
    fallback: bool  # no fresh peer, though peers are known: keep to the per-broker share

    @property
    def share_divisor(self) -> int:
        """The live sidecars known, this one included (at least 1): the quota is divided by this in fallback."""
        return self.known + 1


class ClusterPeers:
    """The other sidecars publishing to the usage topic, by id, with their last record's time, and the records
    of theirs applied."""

    __slots__ = (
        "own_id",
        "stale_ms",
        "forget_ms",
        "since_ms",
        "max_peers",
        "_last",
        "_newest",
        "_applied",
        "_prune_at",
        "_covered",
        "_reads",
    )

    def __init__(self, own_id: str, stale_ms: int, since_ms: int | None = None, forget_ms: int | None = None) -> None:
        """``since_ms``: records dated before it are history, not recorded (None: any fresh record is);
        ``forget_ms``: how long a peer may be silent while the topic goes on before it is forgotten (None:
        ``stale_ms``)."""
        if stale_ms <= 0:
            raise ValueError(f"stale_ms must be positive, got {stale_ms}")
        self.own_id = own_id
        self.stale_ms = stale_ms
        self.forget_ms = stale_ms if forget_ms is None else forget_ms
        self.since_ms = -1 if since_ms is None else since_ms
        self.max_peers: int | None = None  # peers known at most (:meth:`cluster_has`); None: not bounded yet
        self._last: dict[str, int] = {}  # peer id -> its newest record's timestamp (ms)
        self._newest = -1  # the newest timestamp read on the topic, this sidecar's own records included
        self._applied: dict[tuple[str, str], dict[int, int]] = {}  # (peer, incarnation) -> {seq applied: its date}
        self._prune_at = 0
        self._covered: dict[str, int] = {}  # peer id -> until when its usage was assumed by the fallback share (ms)
        self._reads: dict[str, int] = {}  # peer id -> the newest usage encoding its last record says it reads

    def judge(self, source: str, stamp_ms: int, now_ms: int) -> str:
        """A record of ``source`` dated ``stamp_ms`` read at ``now_ms``: :data:`TAKE` (its usage is to be recorded,
        unless :meth:`first_time` finds it applied already), :data:`OWN`, :data:`STALE` or :data:`FUTURE` (dated
        more than :data:`CLOCK_SKEW_MS` ahead: not taken, and it makes its sender neither fresh nor known). Any
        other record makes its sender known as of ``stamp_ms``."""
        if stamp_ms > now_ms + CLOCK_SKEW_MS:
            return FUTURE
        if stamp_ms > self._newest:
            self._newest = stamp_ms
        if source == self.own_id:
            return OWN
        if source not in self._last and not self._room_for(stamp_ms):
            return STALE
        if stamp_ms > self._last.get(source, -1):
            self._last[source] = stamp_ms
        if now_ms - stamp_ms > self.stale_ms or stamp_ms < self.since_ms:
            return STALE
        return COVERED if stamp_ms <= self._covered.get(source, -1) else TAKE

    def cover(self, now_ms: int) -> int:
        """In fallback, the usage of the known peers up to ``now_ms`` is assumed (:func:`fallback_delta`) rather
        than read: their records dated up to then, read later (the topic back after a stall), are :data:`COVERED`,
        not recorded a second time over the share assumed for them. Returns the peers known (whose usage is
        assumed). Counted twice, they left every sidecar a debt of what the others had been assumed to use and then
        reported: with ``stale_ms`` 2 s, the tenant got 0.67 x its quota over the 15 s after a 3 s stall of the
        topic, 0.98 x with them covered (tests/quota/sharing/test_cluster_exactly_once.py)."""
        known = self._known(now_ms)
        for peer in known:
            self._covered[peer] = now_ms
        return len(known)

    def cluster_has(self, brokers: int) -> None:
        """The cluster has ``brokers`` brokers: in sidecar mode one sidecar each, so at most :data:`PEERS_PER_BROKER`
        per broker are known (at least :data:`MIN_PEERS`). Peers beyond that are made up (records written straight
        to the topic, issue 44, T8: 500 of them cut a tenant to quota / 502): the stalest is dropped for a newer
        one, and a record of an unknown peer older than every known one's is skipped."""
        self.max_peers = max(MIN_PEERS, PEERS_PER_BROKER * brokers)
        while len(self._last) > self.max_peers:
            stalest = min(self._last, key=self._last.__getitem__)
            self._drop(stalest)

    def _room_for(self, stamp_ms: int) -> bool:
        """Whether a new peer whose record is dated ``stamp_ms`` may be known: there is room, or the stalest known
        peer is older and is dropped for it."""
        if self.max_peers is None or len(self._last) < self.max_peers:
            return True
        stalest = min(self._last, key=self._last.__getitem__)
        if self._last[stalest] >= stamp_ms:
            return False
        self._drop(stalest)
        return True

    def accept(self, source: str, stamp_ms: int, now_ms: int) -> bool:
        """Whether :meth:`judge` takes the record."""
        return self.judge(source, stamp_ms, now_ms) == TAKE

    def first_time(self, source: str, incarnation: str, seq: int, stamp_ms: int, now_ms: int) -> bool:
        """Whether a taken record numbered ``(incarnation, seq)`` is applied now: False when that number was
        applied already (in whatever order the numbers came: a topic given more partitions may hand a sender's
        records over out of order). A record not numbered (``seq`` 0) always is. A number is remembered while a
        record of it could still be fresh (``stale_ms`` after its date): read again later, :meth:`judge` skips it."""
        if seq <= 0:
            return True
        if now_ms >= self._prune_at:
            self._prune(now_ms)
        applied = self._applied.get((source, incarnation))
        if applied is None:
            applied = self._applied[(source, incarnation)] = {}
        elif seq in applied:
            return False
        applied[seq] = stamp_ms
        return True

    def _prune(self, now_ms: int) -> None:
        """Forget the numbers of stale records (bounded memory: the records of ``stale_ms``, about ``stale_ms /
        sync.ms`` per peer)."""
        kept = {}
        for run, applied in self._applied.items():
            fresh = {seq: stamp for seq, stamp in applied.items() if now_ms - stamp <= self.stale_ms}
            if fresh:
                kept[run] = fresh
        self._applied = kept
        self._prune_at = now_ms + self.stale_ms

    def _drop(self, peer: str) -> None:
        self._last.pop(peer, None)
        self._covered.pop(peer, None)
        self._reads.pop(peer, None)

    def reads(self, source: str, version: int) -> None:
        """``source``'s last record taken says it reads the usage encoding up to ``version`` (0: it does not say,
        a sidecar of an earlier release)."""
        if source in self._last:
            self._reads[source] = version

    def all_read(self, version: int, now_ms: int) -> bool:
        """Whether every known peer reads ``version`` (and one is known at least): only then is what only that version
        carries (a topic's usage, issue 47) worth sending; a peer of an earlier release would refuse the whole
        record. A peer is taken to read only what it said in its last record taken, so one just heard of, or of
        an earlier release, keeps it off."""
        return bool(self._known(now_ms)) and not self.not_reading(version, now_ms)

    def not_reading(self, version: int, now_ms: int) -> list[str]:
        """The known peers that have not said they read ``version``, sorted."""
        return sorted(peer for peer in self._known(now_ms) if self._reads.get(peer, 0) < version)

    def said_reads(self, peer: str) -> bool:
        """Whether a record of ``peer``'s has been taken since it became known, saying what it reads (none yet: a
        peer known only from records not recorded, stale or from before this sidecar followed the topic)."""
        return peer in self._reads

    def forget(self, source: str) -> None:
        """A peer that left for good (its key deleted from the topic): no longer known."""
        self._drop(source)

    def forget_silent(self, now_ms: int) -> list[str]:
        """Forget the peers silent for ``forget_ms`` while the topic went on (its newest record read, never later
        than ``now_ms``); returns them, sorted."""
        topic_ms = min(self._newest, now_ms)
        gone = sorted(peer for peer, stamp in self._last.items() if topic_ms - stamp > self.forget_ms)
        for peer in gone:
            self._drop(peer)
        return gone

    def view(self, now_ms: int) -> PeerView:
        """Fresh and known peers at ``now_ms`` (those silent for ``forget_ms`` forgotten first)."""
        self.forget_silent(now_ms)
        return self.peek(now_ms)

    def peek(self, now_ms: int) -> PeerView:
        """What :meth:`view` would say at ``now_ms``, changing nothing (``quota.explain`` reads it)."""
        stamps = list(self._known(now_ms).values())
        fresh = sum(1 for stamp in stamps if now_ms - stamp <= self.stale_ms)
        return PeerView(fresh=fresh, known=len(stamps), fallback=bool(stamps) and fresh == 0)

    def _known(self, now_ms: int) -> dict[str, int]:
        """The peers heard from within ``forget_ms`` of the newest record read (never later than ``now_ms``), with
        their last record's time: the live sidecars, as :meth:`peek` counts them and :meth:`cover` assumes them."""
        topic_ms = min(self._newest, now_ms)
        return {peer: stamp for peer, stamp in self._last.items() if topic_ms - stamp <= self.forget_ms}

    def stale_peers(self, now_ms: int) -> list[str]:
        return sorted(peer for peer, stamp in self._last.items() if now_ms - stamp > self.stale_ms)


def fallback_delta(own: UsageDelta, unseen: int) -> UsageDelta:
    """The usage ``unseen`` silent peers are assumed to have had while this sidecar recorded ``own``: each byte
    rate (a topic's too), mutation token and new producer id count times ``unseen`` (no ids: they are not the peers' own), no
    connection counts and no number (it is never published). Empty when ``unseen`` is 0."""
    if unseen <= 0:
        return UsageDelta(source=own.source, scope=own.scope)

    def scaled(entries: Iterable[EntityUsage]) -> tuple[EntityUsage, ...]:
        return tuple((user, client_id, value * unseen) for user, client_id, value in entries)

    return replace(
        own,
        produce=scaled(own.produce),
        fetch=scaled(own.fetch),
        mutations=scaled(own.mutations),
        topic_produce=scaled(own.topic_produce),
        topic_fetch=scaled(own.topic_fetch),
        partition_produce=scaled(own.partition_produce),
        partition_fetch=scaled(own.partition_fetch),
        producer_ids=tuple((user, count * unseen, ()) for user, count, _ in own.producer_ids),
        listeners=(),
        ips=(),
        open_connections=(),
        incarnation="",
        seq=0,
    )
