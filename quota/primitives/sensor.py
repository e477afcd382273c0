"""Per-entity quota sensors and the plain-value stats read from them (Kafka's ``ClientSensors``).

One :class:`ClientSensors` exists per quota tag pair (see :mod:`quota.primitives.entity`): the sampled :class:`~quota.primitives.rate.Rate`
the quota is checked against, plus cumulative counters for metrics and the usage log. Kafka keeps a
``byte-rate`` Rate and a ``throttle-time`` Avg per tag pair; here the throttle time is kept as a cumulative total and
count, which is what a Prometheus counter wants (the average is ``total / count``). A throttle decided by a shadow
quota was never applied: it is counted apart (``shadow_*``), so the applied counters say only what clients felt.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter

from quota.primitives import smoothing
from quota.primitives.entity import QuotaEntity, QuotaTags, ResolvedQuota
from quota.primitives.rate import QuotaWindow, Rate, at_limit
from quota.primitives.token_bucket import TokenBucket
from quota.primitives.top import OTHER


@dataclass(frozen=True, slots=True)
class EntityStats:
    """A snapshot of one sensor, as plain values (what ``proxy/`` turns into metrics and usage records)."""

    tags: QuotaTags
    entity: str | None
    """Kafka path of the matched entity (``/users/<default>``), ``None`` when no quota applies."""
    limit: float
    """The quota in units per second (bytes/s for byte rates); ``inf`` when unlimited."""
    rate: float
    """The measured rate now, exactly as the quota check measures it."""
    value_total: float
    """Everything recorded since the sensor was created (bytes, for byte rates)."""
    throttle_time_ms_total: int
    """Throttle time applied (reported to the client and muted for); shadow throttles are not in it."""
    throttle_time_ms_max: int
    """The longest throttle applied within the last quota window span (``num * size``), 0 if none."""
    throttled_count: int
    """How many responses were throttled (throttle time > 0, applied)."""
    last_record_ms: int
    shadow: bool
    shadow_throttle_time_ms_total: int = 0
    """Throttle time a shadow quota decided and did not apply."""
    shadow_throttled_count: int = 0
    """How many decisions a shadow quota would have throttled."""


class ClientSensors:
    """The mutable state behind one quota tag pair. Owned by a quota manager; not shared across threads."""

    __slots__ = (
        "tags",
        "rate",
        "limit",
        "entity",
        "shadow",
        "representative",
        "last_record_ms",
        "value_total",
        "throttle_time_ms_total",
        "throttled_count",
        "throttle_max",
        "throttle_max_ms",
        "shadow_throttle_time_ms_total",
        "shadow_throttled_count",
        "smooth",
        "moved_ms",
        "fast",
        "resolved_version",
    )

    def __init__(self, resolved: ResolvedQuota, window: QuotaWindow, user: str, client_id: str, now_ms: int) -> None:
        self.tags: QuotaTags = resolved.tags
        self.rate = Rate(window)
        self.limit: float = resolved.limit
        self.entity: QuotaEntity | None = resolved.entity
        self.shadow: bool = resolved.shadow
        # One (user, client_id) that maps to these tags: re-resolved when the quota table is swapped (the tags
        # themselves when they are that client's names, as under <default> quotas: no second tuple per tenant).
        self.representative: tuple[str, str] = self.tags if self.tags == (user, client_id) else (user, client_id)
        self.last_record_ms = now_ms
        self.value_total = 0.0
        self.throttle_time_ms_total = 0
        self.throttled_count = 0
        self.throttle_max = 0  # longest throttle in the current window span, and when it was decided
        self.throttle_max_ms = now_ms
        self.shadow_throttle_time_ms_total = 0
        self.shadow_throttled_count = 0
        self.smooth: TokenBucket | None = None  # quota.smoothing's bucket, made at the first record while it is on
        self.moved_ms = now_ms  # when it last went to the back of its manager's table (quota.primitives.sensor_table)
        # True while limit, entity and shadow are what the current table resolves for the representative (set by a
        # record of the representative; dropped by apply and retire, so for every sensor a quota change can reach,
        # which is found through the representative): a record may skip resolving (SensorKeeper.known).
        self.fast = False
        # The version of its keeper's quota table under which the client named by the tags last resolved to these
        # tags and this limit (-1: not since the last change of limit): a peer's usage comes named by its tags, so a
        # row of it may skip resolving (ClientQuotaManager.record_remote_rows, SensorKeeper.for_remote).
        self.resolved_version = -1

    def apply(self, resolved: ResolvedQuota) -> None:
        """Take the limit of ``resolved`` (same tags) so the next check uses it."""
        self.fast = False  # the manager says whether it holds for the representative
        self.resolved_version = -1
        self.limit = resolved.limit
        self.entity = resolved.entity
        self.shadow = resolved.shadow
        if self.smooth is not None:
            self.smooth = smoothing.reshaped(self.smooth, resolved.limit, self.rate.window, self.last_record_ms)

    def retire(self) -> None:
        """No quota is counted in these tags any more (the table moved their clients to other tags): no limit, so
        no ``limit`` is reported for them; the counters stay until the sensor expires."""
        self.limit = float("inf")
        self.entity = None
        self.shadow = False
        self.smooth = None
        self.fast = False
        self.resolved_version = -1

    def record(self, value: float, now_ms: int) -> None:
        self.rate.record(value, now_ms)
        self.value_total += value
        self.last_record_ms = now_ms

    def record_within(self, value: float, now_ms: int) -> bool:
        """:meth:`record`, answering whether the rate is then surely within :attr:`limit` (:meth:`Rate.record_within`:
        one call for both)."""
        self.value_total += value
        self.last_record_ms = now_ms
        return self.rate.record_within(value, now_ms, self.limit)

    def record_remote(self, value: float, now_ms: int) -> None:
        """A peer's usage: in the rate (and keeping the sensor alive), not in this process's total."""
        self.rate.record(value, now_ms)
        self.last_record_ms = now_ms

    # -- eviction from a full table (quota.primitives.sensor_keeper, quota.primitives.debt_sketch) ----------------

    def paid_off_ms(self, now_ms: int) -> float:
        """When what the entity used of its quota (its rate's sum over the window) is paid off at its limit."""
        limit = self.limit
        return now_ms if math.isinf(limit) or limit <= 0 else now_ms + self.rate.total(now_ms) / limit * 1000.0

    def carry(self, remaining_ms: float, now_ms: int, full: bool) -> None:
        """A sensor just made starts owing what its limit pays off in ``remaining_ms`` (a debt carried from its
        eviction); made while its table is ``full``, it gets no fresh burst besides: unless it owes more, its rate
        starts as if it had been at its limit for the whole window, samples that leave one a window, so it sends at
        its limit from the start and a flood of new names gains nothing per name."""
        limit, window = self.limit, self.rate.window
        if math.isinf(limit):
            return
        owed = limit * remaining_ms / 1000.0
        if full and owed < limit * window.min_elapsed_ms / 1000.0:
            self.rate.seed(at_limit(limit, window, now_ms), now_ms)
        elif owed > 0:
            self.rate.record(owed, now_ms)

    def record_throttle(self, throttle_time_ms: int, shadow: bool = False, refused: bool = False) -> None:
        """Count a throttle decided on the last record: applied, or (``shadow``) computed and not applied. A request
        ``refused`` in part (KIP-599's strict admission) counts as throttled even when no time was left to tell."""
        if refused and throttle_time_ms <= 0 and not shadow:
            self.throttled_count += 1
        elif throttle_time_ms > 0 and shadow:
            self.shadow_throttle_time_ms_total += throttle_time_ms
            self.shadow_throttled_count += 1
        elif throttle_time_ms > 0:
            self.throttle_time_ms_total += throttle_time_ms
            self.throttled_count += 1
            now = self.last_record_ms
            if throttle_time_ms >= self._current_max(now):
                self.throttle_max, self.throttle_max_ms = throttle_time_ms, now

    def _current_max(self, now_ms: int) -> int:
        return self.throttle_max if now_ms - self.throttle_max_ms < self.rate.window.span_ms else 0

    def stats(self, now_ms: int) -> EntityStats:
        return EntityStats(
            tags=self.tags,
            entity=None if self.entity is None else self.entity.path,
            limit=self.limit,
            rate=self.rate.peek(now_ms),
            value_total=self.value_total,
            throttle_time_ms_total=self.throttle_time_ms_total,
            throttle_time_ms_max=self._current_max(now_ms),
            throttled_count=self.throttled_count,
            last_record_ms=self.last_record_ms,
            shadow=self.shadow,
            shadow_throttle_time_ms_total=self.shadow_throttle_time_ms_total,
            shadow_throttled_count=self.shadow_throttled_count,
        )

    def __repr__(self) -> str:
        return f"ClientSensors(tags={self.tags!r}, limit={self.limit!r}, last_record_ms={self.last_record_ms})"


def summed_stats(parts: Iterable[list[ClientSensors]], now_ms: int, span_ms: int) -> EntityStats:
    """The sensors of ``parts`` summed as one (tags :data:`quota.primitives.top.OTHER`): their counters added up, the longest
    throttle of the last ``span_ms``, the latest record; no limit and no rate (it would cost a measurement each)."""
    names = (
        "value_total",
        "throttle_time_ms_total",
        "throttled_count",
        "shadow_throttle_time_ms_total",
        "shadow_throttled_count",
    )
    getters = [(name, attrgetter(name)) for name in names]
    sums = dict.fromkeys(names, 0)
    throttle_max = last_record_ms = 0
    for part in parts:
        for name, get in getters:
            sums[name] += sum(map(get, part))
        for s in part:
            if now_ms - s.throttle_max_ms < span_ms and s.throttle_max > throttle_max:
                throttle_max = s.throttle_max
        last_record_ms = max(last_record_ms, max(map(attrgetter("last_record_ms"), part), default=0))
    return EntityStats(
        tags=QuotaTags(OTHER, OTHER),
        entity=None,
        limit=math.inf,
        rate=math.nan,
        throttle_time_ms_max=throttle_max,
        last_record_ms=last_record_ms,
        shadow=False,
        **sums,
    )
