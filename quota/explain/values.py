"""What ``kafka-quota-proxy explain`` answers, as plain frozen values, and the state it is computed from. Pure.

The question: for one client, a principal (``user``), a ``client_id`` and a source ``ip`` (and, optionally, the
``listener`` it connects to), why is it throttled, or why not? The answer (:class:`Explanation`) has one
:class:`Finding` per quota that can hold it back: each user/client-id quota with the entry that matches and its
precedence level (Kafka's eight, ``/users/<user>/clients/<client-id>`` first), the connection quotas by IP,
listener and proxy-wide, each with its limit, what is measured now against it, and the throttle a request (or a new
connection) would be given now; then the client's open connections as they are now (muted, held), and the states of
the whole proxy that take part (shadow mode, volume usage, the cluster budget, full sensor tables).

The state (:class:`QuotaState`) is the quota managers themselves, read without changing them (``Rate.peek``, sensors
looked up and never made), and a few plain values the proxy gathers (its open connections, the volume state).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, TypedDict

# A finding's verdict.
THROTTLED = "THROTTLED"  # over its limit now: a request (or a new connection) now is throttled, muted or held
SHADOW = "SHADOW"  # over a shadow limit: computed and metered, not applied
WITHIN = "WITHIN"  # a limit applies; the client is within it now
UNLIMITED = "UNLIMITED"  # no entry matches: nothing limits it
BROKER = "BROKER"  # enforced by the brokers, not the proxy (request_percentage)
FULL = "FULL"  # an open-connection count is at its limit: a new connection is closed

# The answer's overall verdict.
PAUSED = "PAUSED"  # volume usage PAUSE: every produce is refused, whoever sends it
NOT_THROTTLED = "NOT_THROTTLED"

MAX_LISTED_CONNECTIONS = 20
"""Open connections of the client listed one by one in an answer (the rest are counted)."""


@dataclass(frozen=True, slots=True)
class Who:
    """The client asked about. ``ip`` is canonical (``quota.managers.connection.normalize_ip``); ``listener`` None:
    any listener."""

    user: str
    client_id: str
    ip: str
    listener: str | None = None
    topic: str | None = None  # a topic it writes or reads: that topic's quotas are explained too
    group: str | None = None  # a consumer group it is a member of: that group's request_rate is explained too
    partition: int | None = None  # a partition of ``topic``: its partition quotas are explained too


class FindingOf(TypedDict):
    """Which quota a :class:`Finding` is about: the fields every finding of one quota shares."""

    quota: str
    scope: str
    unit: str


@dataclass(frozen=True, slots=True)
class Finding:
    """One quota's part in the answer. ``limit`` None: none applies; ``measured``: the rate now as the quota check
    measures it (a token bucket's rate of use for bucket quotas, whose ``tokens``/``burst`` are also given);
    ``throttle_ms``: what a request recorded now would be throttled or held for (a new connection, for connection
    quotas); ``recent_throttle_ms``: the longest throttle applied within the last window span."""

    quota: str  # producer_byte_rate, consumer_byte_rate, controller_mutation_rate, producer_ids_rate,
    # request_percentage, connection_creation_rate, max_connections
    scope: str  # "user/client-id", "user", "ip", "listener <name>", "proxy-wide", "topic <name>"; a broker's set
    # adds " broker N"
    verdict: str
    unit: str
    entity: str | None = None  # the matching entry (/users/alice/clients/etl, /ips/<default>) or the setting
    level: int | None = None  # 1..8: Kafka's precedence level of the matching user/client-id entry
    level_path: str | None = None  # that level as Kafka's docs write it (/users/<user>/clients/<default>)
    limit: float | None = None
    measured: float | None = None
    throttle_ms: int = 0
    recent_throttle_ms: int = 0
    tokens: float | None = None
    burst: float | None = None
    counted_in: str | None = None  # the sensor's tags (who shares this quota's budget)
    overflow: bool = False  # not tracked on its own: counted in its quota's <overflow> entity (a full table)
    shadow: bool = False
    overridden: tuple[str, ...] = ()  # entries that also match, at lower precedence (not applied)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class OpenConnection:
    """One of the client's open connections now (gathered by the proxy: the connection's flow state)."""

    listener: str
    peer: str
    user: str
    mute_state: str  # Kafka's ChannelMuteState name: NOT_MUTED, MUTED_AND_THROTTLED, ...
    muted_ms: int  # how long its quota mute still lasts (0: none)
    held_ms: int  # how long its longest held request still waits (0: none)
    muted_for: str | None = None  # the client id whose throttle muted it last (a connection's requests name theirs)
    muted_by: str = ""  # the quota whose throttle that was ("topic_producer_byte_rate (topic orders)"; "": not said)

    def holds_back(self, who: Who) -> bool:
        """Whether it holds ``who`` back now: muted for a throttle of ``who``'s client id, or holding a request (a
        new producer id of the user: producer_ids_rate is the user's)."""
        return (self.muted_ms > 0 and (self.muted_for or "") == who.client_id) or self.held_ms > 0


@dataclass(frozen=True, slots=True)
class VolumeFinding:
    """Cluster volume usage, as the produce path sees it now."""

    state: str  # OPEN, THROTTLE, PAUSE
    factor: float
    freshness_ms: int
    missing_data_action: str
    missing_data: tuple[int, ...]  # live brokers with no fresh snapshot
    snapshot_age_ms: dict[str, int]  # broker id -> age of its latest snapshot
    awaiting_data: bool


@dataclass(frozen=True, slots=True)
class ProxyWide:
    """The states of the whole proxy that take part in the answer."""

    shadow_mode: bool  # quota.mode: shadow
    scope: str  # quota.scope: broker or cluster
    cluster: str | None  # what the cluster budget is now, in words (None: quota.scope broker)
    volume: VolumeFinding | None
    tracked: dict[str, list[int]]  # quota -> [entities tracked, quota.max.tracked.entities]


@dataclass(frozen=True, slots=True)
class Explanation:
    who: Who
    verdict: str  # THROTTLED, PAUSED, NOT_THROTTLED
    reasons: tuple[str, ...]  # one line per thing that holds the client back now
    findings: tuple[Finding, ...]
    connections: tuple[OpenConnection, ...]  # at most MAX_LISTED_CONNECTIONS
    connections_open: int
    proxy: ProxyWide


def as_json(value: Any) -> Any:
    """A value of this module as JSON types: dataclasses as objects, infinities and NaN as null."""
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: as_json(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): as_json(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
