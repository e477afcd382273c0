"""Whether a sidecar's usage records carry its topic quotas' usage (issue 47). Pure: times are passed in.

A record with a topic's usage is version 3 of the usage encoding (:mod:`quota.sharing.usage_encoding`), which a
sidecar of an earlier release refuses whole, its clients' usage included. So a topic's usage goes into the records
only while every live peer has said, in its last record taken, that it reads version 3
(:meth:`~quota.sharing.cluster_peers.ClusterPeers.all_read`), and while one peer at least is known (none: nobody to
tell). Until then it is left out, not kept for later (sent late, it would be a debt all at once): each sidecar holds
a topic to its quota by what passes through it, as under ``quota.scope: broker``, and every peer reads its records,
so a rolling upgrade keeps the client quotas shared throughout. A sidecar of an earlier release that joins is
refused a record or two of each peer, until the peers have read its first.

Partition usage (version 4) goes the same way, gated on every live peer reading version 4: a peer of the release
before (version 3) keeps getting topic usage, and each sidecar keeps the partition quotas to itself meanwhile.
"""

from __future__ import annotations

from quota.primitives.topic_quotas import NAMES, PARTITION_NAMES
from quota.sharing.cluster_peers import ClusterPeers
from quota.sharing.usage_encoding import TOPIC_VERSION, VERSION
from quota.sharing.usage_gathered import Gathered, Leftover

TOPIC_KEYS = tuple(NAMES.values())
"""The keys a topic's usage is gathered under (:class:`~quota.sharing.usage_share.TopicTap`)."""
PARTITION_KEYS = tuple(PARTITION_NAMES.values())
"""The keys a partition's usage is gathered under."""


class TopicShare:
    """Whether topic usage is sent now (:attr:`shared`), and partition usage (:attr:`partitions_shared`, version 4:
    a peer of the release before reads topic usage and not partition usage), and what to say when that changes."""

    __slots__ = ("shared", "partitions_shared", "_held")

    def __init__(self) -> None:
        self.shared = False
        self.partitions_shared = False
        self._held = {"topic": False, "partition": False}  # left out while a known peer does not read it (logged)

    def settle(
        self, gathered: Gathered, leftover: Leftover, peers: ClusterPeers, now_ms: int
    ) -> tuple[Leftover, str | None]:
        """Leave the topic (and partition) usage out of ``gathered`` and ``leftover`` (returned) unless every known
        peer reads it; and a line for the log when a peer that does not read it starts or stops holding it back
        (None otherwise: a sidecar alone, or starting, says nothing)."""
        self.shared = peers.all_read(TOPIC_VERSION, now_ms)
        self.partitions_shared = peers.all_read(VERSION, now_ms)
        notes = [self._note("topic", self.shared, TOPIC_VERSION, peers, now_ms)]
        if self.shared or self.partitions_shared:  # else the topic's line says it (a peer reading neither)
            notes.append(self._note("partition", self.partitions_shared, VERSION, peers, now_ms))
        dropped = (() if self.shared else TOPIC_KEYS) + (() if self.partitions_shared else PARTITION_KEYS)
        if dropped:
            gathered.drop(dropped)
            leftover = leftover.without(dropped) if len(leftover) else leftover
        said = [note for note in notes if note is not None]
        return leftover, "; ".join(said) if said else None

    def _note(self, what: str, shared: bool, version: int, peers: ClusterPeers, now_ms: int) -> str | None:
        """The line for the log when ``what``'s usage starts or stops being held back (None: no change)."""
        if shared:
            if self._held[what]:
                self._held[what] = False
                return f"every live sidecar reads {what} usage now: {what} quotas are one budget across the sidecars"
            return None
        # a peer known only from records not taken (dated before this sidecar followed the topic, or delayed past
        # stale_ms) has not said what it reads: it holds the usage back too, but that is every start's first
        # seconds, not a rolling upgrade, and is not logged (cluster_usage_topic_quotas_shared says it)
        earlier = [peer for peer in peers.not_reading(version, now_ms) if peers.said_reads(peer)]
        if earlier and not self._held[what]:
            self._held[what] = True
            return (
                f"{len(earlier)} sidecar(s) do not read {what} usage (an earlier release: {', '.join(earlier[:20])}): "
                f"each sidecar keeps the {what} quotas to itself until every live sidecar reads it"
            )
        return None
