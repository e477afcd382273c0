"""Whether a sidecar's usage records carry its topic quotas' usage (issue 47). Pure: times are passed in.

A record with a topic's usage is version 3 of the usage encoding (:mod:`quota.sharing.usage_encoding`), which a
sidecar of an earlier release refuses whole, its clients' usage included. So a topic's usage goes into the records
only while every live peer has said, in its last record taken, that it reads version 3
(:meth:`~quota.sharing.cluster_peers.ClusterPeers.all_read`), and while one peer at least is known (none: nobody to
tell). Until then it is left out, not kept for later (sent late, it would be a debt all at once): each sidecar holds
a topic to its quota by what passes through it, as under ``quota.scope: broker``, and every peer reads its records,
so a rolling upgrade keeps the client quotas shared throughout. A sidecar of an earlier release that joins is
refused a record or two of each peer, until the peers have read its first.
"""

from __future__ import annotations

from quota.primitives.topic_quotas import NAMES
from quota.sharing.cluster_peers import ClusterPeers
from quota.sharing.usage_encoding import VERSION
from quota.sharing.usage_gathered import Gathered, Leftover

TOPIC_KEYS = tuple(NAMES.values())
"""The keys a topic's usage is gathered under (:class:`~quota.sharing.usage_share.TopicTap`)."""


class TopicShare:
    """Whether topic usage is sent now (:attr:`shared`), and what to say when that changes."""

    __slots__ = ("shared", "_held")

    def __init__(self) -> None:
        self.shared = False
        self._held = False  # left out because a known peer does not read it (said in the log)

    def settle(
        self, gathered: Gathered, leftover: Leftover, peers: ClusterPeers, now_ms: int
    ) -> tuple[Leftover, str | None]:
        """Leave the topic usage out of ``gathered`` and ``leftover`` (returned) unless every known peer reads it;
        and a line for the log when a peer that does not read it starts or stops holding it back (None
        otherwise: a sidecar alone, or starting, says nothing)."""
        self.shared = peers.all_read(VERSION, now_ms)
        note = None
        if self.shared:
            if self._held:
                self._held = False
                note = "every live sidecar reads topic usage now: topic quotas are one budget across the sidecars"
            return leftover, note
        behind = peers.not_reading(VERSION, now_ms)
        if behind and not self._held:
            self._held = True
            note = (
                f"{len(behind)} sidecar(s) do not read topic usage (an earlier release: {', '.join(behind[:20])}): "
                "each sidecar keeps the topic quotas to itself until every live sidecar reads it"
            )
        gathered.drop(TOPIC_KEYS)
        return (leftover.without(TOPIC_KEYS) if len(leftover) else leftover), note
