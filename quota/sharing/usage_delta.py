"""What one proxy process saw of quota usage since its last sync, as a plain value. Pure.

Several processes enforcing one quota state (``workers: N`` today; sidecars sharing a usage topic in issue 26) each
keep their own quota managers and send the others, every sync, the usage they recorded themselves since the last
one. A receiver records it as *remote usage* (:mod:`quota.sharing.remote_usage`): counted in its sensors and buckets, so its
own clients' next decisions see the total, but never throttling anyone by itself.

A :class:`UsageDelta` holds, for the entities with usage since the last sync only (so its size is bounded by the
traffic of one sync interval, not by the number of entities known):

* ``produce`` / ``fetch``: ``(user, client_id, bytes)`` per byte-rate sensor (one client that resolves to the
  sensor's tags stands for it; the receiver resolves it against its own table). Net of what was unrecorded.
* ``mutations``: ``(user, client_id, tokens)``, the controller-mutation tokens taken less those refunded (negative
  when more was refunded than taken).
* ``requests``: ``(user, client_id, requests)`` per ``request_rate`` sensor, as the byte rates' rows: a client
  entity's under scope ``requests``, a group's (``("", group)``) under scope ``groups``
  (:mod:`quota.managers.request_rate`; between workers only, never on the usage topic).
* ``producer_ids``: ``(user, new ids counted, ids)``: the tokens taken for new producer ids (less those of holds
  released: negative when more were released), and the ids admitted, let through to the broker (at most
  :data:`MAX_PRODUCER_IDS_PER_USER` of them, so that peers' caches know them and do not count them again). A held id
  is counted when held and sent as admitted when its hold ends, never before (:mod:`quota.managers.producer_id_holds`), so
  an entry may carry ids and a count of 0.
* ``scope``: the quota set the byte rates and producer ids were counted in: ``""`` for the proxy's own, a broker's
  node id for that broker's budget under ``quota.scope: broker`` in cluster mode, ``volume`` for the volume
  throttle's scaled ``producer_byte_rate``, ``requests`` and ``groups`` for the request rates (mutations and
  connections are always the proxy's own, in the ``""`` delta).
* ``topic_produce`` / ``topic_fetch``: ``("", topic, bytes)`` per topic quota'd by ``producer_byte_rate`` /
  ``consumer_byte_rate`` on a ``{topic: ...}`` entity (:mod:`quota.primitives.topic_quotas` counts a topic as the
  client id of an anonymous client): the record bytes written to or read from it. In the proxy's own delta (scope
  ``""``), beside the client usage, so that a topic's quota is one budget across workers and sidecars.
* ``partition_produce`` / ``partition_fetch``: ``(topic, partition, bytes)`` per partition quota'd on a ``{topic: ...,
  partition: ...}`` entity (counted as the client ``(topic, partition)``), the same way.
* ``listeners`` / ``ips``: connections accepted per listener (net of those un-recorded for their IP's rate) and
  connections counted per IP (KIP-612's rates).
* ``open_connections``: ``(kind, key, n)``, the sender's open connections now, in all (``total``), per
  ``listener`` and per ``ip``, for the counts that changed since its last sync (KIP-402's limits; absolute, not
  deltas, so a receiver that forgets a sender loses nothing else).
* ``incarnation`` / ``seq``: on the usage topic, which run of the sender made it (a random id per start) and its
  number in that run (1, 2, ...), so that a follower applies each record once however often it reads it (a replay
  of the topic, a send retried after a timeout that had in fact gone through: :mod:`quota.sharing.cluster_peers`). ``seq``
  0: not numbered (the workers' deltas; a record from a sidecar without them), applied as read.
* ``reads``: as decoded, the newest version of the encoding its sender reads (every encoding says it); a sidecar
  sends a topic's usage only while every peer reads it (:meth:`~quota.sharing.cluster_peers.ClusterPeers.all_read`).

Its encoding, the same bytes between workers and on the usage topic: :mod:`quota.sharing.usage_encoding`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

MAX_PRODUCER_IDS_PER_USER = 4096
"""Producer ids sent per user per sync; past that only their count is (peers take the tokens, not the ids)."""

EntityUsage = tuple[str, str, float]  # (user, client_id, value)
ProducerIdUsage = tuple[str, int, tuple[int, ...]]  # (user, new ids counted, the ids)


class Rows(Sequence[EntityUsage]):
    """``(user, client_id, value)`` rows kept as three columns (lists, or any sequences): what decoding gives
    for a byte-rate or mutation list. A peer's record of 10^5 rows is then three lists of names and numbers, which the
    cyclic garbage collector does not look into, rather than 10^5 tuples it walks at every collection until they
    go (tens of milliseconds each, the GIL held); a receiver reads the columns (:func:`columns`). It reads as the
    tuple of its rows, and equals it."""

    __slots__ = ("users", "client_ids", "values")

    def __init__(self, users: Sequence[str], client_ids: Sequence[str], values: Sequence[float]) -> None:
        if not len(users) == len(client_ids) == len(values):
            raise ValueError(f"columns of {len(users)}, {len(client_ids)} and {len(values)} items")
        self.users, self.client_ids, self.values = users, client_ids, values

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, i: int) -> EntityUsage: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[EntityUsage, ...]: ...

    def __getitem__(self, i: int | slice) -> EntityUsage | tuple[EntityUsage, ...]:
        if isinstance(i, slice):
            return tuple(zip(self.users[i], self.client_ids[i], self.values[i]))
        return self.users[i], self.client_ids[i], self.values[i]

    def __iter__(self) -> Iterator[EntityUsage]:
        return zip(self.users, self.client_ids, self.values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Rows):
            return (
                len(self) == len(other)
                and list(self.values) == list(other.values)
                and list(self.users) == list(other.users)
                and list(self.client_ids) == list(other.client_ids)
            )
        if isinstance(other, tuple):
            return tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Rows({tuple(self)!r})"


def columns(rows: Sequence[EntityUsage]) -> tuple[Sequence[str], Sequence[str], Sequence[float]]:
    """The users, client ids and values of ``rows`` (a :class:`Rows`' own columns, without a copy)."""
    if isinstance(rows, Rows):
        return rows.users, rows.client_ids, rows.values
    return [row[0] for row in rows], [row[1] for row in rows], [row[2] for row in rows]


@dataclass(frozen=True, slots=True)
class UsageDelta:
    source: str  # who recorded it (a worker index, a sidecar id): receivers skip their own
    scope: str = ""  # whose budget: "" the proxy's own quota set, else a broker's node id (quota.scope broker)
    produce: Sequence[EntityUsage] = ()  # a tuple of rows, or Rows (decoded)
    fetch: Sequence[EntityUsage] = ()
    mutations: Sequence[EntityUsage] = ()
    requests: Sequence[EntityUsage] = ()  # request_rate, of client entities or of groups (by scope)
    topic_produce: Sequence[EntityUsage] = ()  # ("", topic, bytes): the topic quotas' usage
    topic_fetch: Sequence[EntityUsage] = ()
    partition_produce: Sequence[EntityUsage] = ()  # (topic, partition, bytes): the partition quotas' usage
    partition_fetch: Sequence[EntityUsage] = ()
    producer_ids: tuple[ProducerIdUsage, ...] = ()
    listeners: tuple[tuple[str, int], ...] = ()
    ips: tuple[tuple[str, int], ...] = ()
    open_connections: tuple[
        tuple[str, str, int], ...
    ] = ()  # absolute counts that changed (quota.primitives.peer_connections)
    incarnation: str = ""  # the sender's run (usage topic records): with seq, what makes a record applied once
    seq: int = 0  # its number in that run, from 1; 0: not numbered
    # the newest encoding version its sender reads, as decoded (0: not said, an earlier release); not its content
    reads: int = field(default=0, compare=False)

    @property
    def empty(self) -> bool:
        return not (
            self.produce
            or self.fetch
            or self.mutations
            or self.requests
            or self.topic_produce
            or self.topic_fetch
            or self.partition_produce
            or self.partition_fetch
            or self.producer_ids
            or self.listeners
            or self.ips
            or self.open_connections
        )

    @property
    def entities(self) -> int:
        """How many entries it carries (what its size grows with)."""
        return (
            len(self.produce)
            + len(self.fetch)
            + len(self.mutations)
            + len(self.requests)
            + len(self.topic_produce)
            + len(self.topic_fetch)
            + len(self.partition_produce)
            + len(self.partition_fetch)
            + len(self.producer_ids)
            + len(self.listeners)
            + len(self.ips)
            + len(self.open_connections)
        )
