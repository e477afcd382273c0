"""The controller mutation quota (KIP-599): a token bucket per (user, client-id), as a pure object.

CreateTopics, CreatePartitions and DeleteTopics cost one token per partition they create or delete. The bucket
of each quota entity (same entities and precedence as the byte-rate quotas, key ``controller_mutation_rate``):

* ``R`` = the quota (mutations per second), ``B`` = ``R * controller.quota.window.num *
  controller.quota.window.size.seconds`` (the burst);
* tokens refill at ``R`` up to ``B``: ``K = min(K + (now - T) * R, B)``; a new bucket starts full;
* strict (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+): topics are taken in request order; a topic
  is admitted iff ``K >= 0`` when its turn comes, and then ``K -= N`` (``K`` may go negative, so one topic of any
  size always fits a non-empty bucket); the rest are rejected, and the client is throttled for ``-K / R``;
* permissive (older versions): everything is admitted and recorded, and the client is throttled for ``-K / R``
  when that leaves ``K < 0``;
* Kafka charges only the partitions it creates or deletes (it validates first): the proxy decides before the
  broker has, so it gives back (:meth:`ControllerMutationQuotaManager.refund`) the tokens of every topic the
  broker's answer reports as failed, never above the burst; the throttle-time counters count the throttle the
  client is told once that answer has settled it (:meth:`ControllerMutationQuotaManager.record_throttle`).

Beyond Kafka, the buckets are bounded as the byte-rate sensors are (``quota.max.tracked.entities``,
:mod:`quota.primitives.overflow`): past the cap, a new (user, client-id) a quota names only as ``<default>`` takes its tokens
from its quota's one ``<overflow>`` bucket, so rotating client ids share one burst instead of a fresh one each.

KIP-599's example: ``R = 5``, ``B = 500``; 560 mutations leave ``K = -60``: throttled for 12 s. Kafka also keeps a
sampled ``rate`` of the mutations for its metrics; so does :class:`MutationSensors`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from quota.managers.client_quota import ClientQuotaManager
from quota.primitives.clock import Clock
from quota.primitives.decision import FORWARD, Decision, Throttle
from quota.primitives.entity import CONTROLLER_MUTATION_RATE, ResolvedQuota
from quota.primitives.overflow import DEFAULT_MAX_TRACKED_ENTITIES
from quota.primitives.peer_refunds import PeerRefunds
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow
from quota.primitives.sensor import ClientSensors, EntityStats
from quota.primitives.sensor_keeper import SensorKeeper
from quota.primitives.throttle import INT32_MAX
from quota.primitives.token_bucket import TokenBucket
from quota.primitives.top import no_pause


class MutationSensors(ClientSensors):
    """A byte-rate sensor (the sampled ``rate`` Kafka reports) plus the token bucket the quota is enforced on."""

    __slots__ = ("bucket",)

    def __init__(self, resolved: ResolvedQuota, window: QuotaWindow, user: str, client_id: str, now_ms: int) -> None:
        super().__init__(resolved, window, user, client_id, now_ms)
        self.bucket = TokenBucket(resolved.limit, _burst(resolved.limit, window), now_ms)

    def apply(self, resolved: ResolvedQuota) -> None:
        super().apply(resolved)
        self.bucket.reconfigure(resolved.limit, _burst(resolved.limit, self.rate.window), self.last_record_ms)

    def paid_off_ms(self, now_ms: int) -> float:
        """When the bucket is full again: its spent tokens refilled at its rate."""
        bucket = self.bucket
        if math.isinf(bucket.burst) or bucket.rate <= 0:
            return now_ms
        return now_ms + (bucket.burst - bucket.refill(now_ms)) / bucket.rate * 1000.0

    def carry(self, remaining_ms: float, now_ms: int, full: bool) -> None:
        """Owing the tokens its rate refills in ``remaining_ms`` (carried from its eviction); made while its table is
        full, at least its whole burst (it starts empty: its creates are admitted as its rate refills it, none from
        a fresh burst)."""
        bucket = self.bucket
        if math.isinf(bucket.burst):
            return
        owed = bucket.rate * remaining_ms / 1000.0
        if full:
            owed = max(owed, bucket.burst)
        if owed > 0:
            bucket.take(owed, now_ms)


def _burst(limit: float, window: QuotaWindow) -> float:
    return limit * window.num * window.size_seconds


@dataclass(frozen=True, slots=True)
class Admission:
    """A strict decision: ``admitted[i]`` for the request's i-th topic, and the throttle (None when nothing was
    rejected). Under a shadow quota every topic is admitted and the throttle is marked ``shadow`` (metered only)."""

    admitted: tuple[bool, ...]
    throttle: Throttle | None = None

    @property
    def all_admitted(self) -> bool:
        return all(self.admitted)


class ControllerMutationQuotaManager(ClientQuotaManager):
    """``controller_mutation_rate`` per (user, client-id). Every method takes an optional ``now_ms``."""

    sensors_class = MutationSensors
    keeper: SensorKeeper[MutationSensors]  # made of sensors_class

    def __init__(
        self,
        quotas: QuotaTable,
        clock: Clock,
        window: QuotaWindow = QuotaWindow(),
        max_mute_ms: int | None = None,
        *,
        shadow: bool = False,
        max_tracked_entities: int = DEFAULT_MAX_TRACKED_ENTITIES,
    ) -> None:
        super().__init__(
            quotas,
            CONTROLLER_MUTATION_RATE,
            clock,
            window,
            None,
            shadow=shadow,
            max_tracked_entities=max_tracked_entities,
        )
        self.max_mute_ms = INT32_MAX if max_mute_ms is None else max_mute_ms
        self.peer_refunds = PeerRefunds()  # what each peer may give back: what it charged (issue 44, T8)

    def admit(self, user: str, client_id: str, mutations: Sequence[int | None], now_ms: int | None = None) -> Admission:
        """Strict admission of a request's topics, in order. ``None`` for a topic whose count is not known yet
        (the proxy records it with :meth:`record` once the broker's answer tells it): it is admitted or not by the
        same rule, and takes nothing now."""
        now = self._now(now_ms)
        resolved = self.resolve(user, client_id)
        if resolved.unlimited:
            return Admission((True,) * len(mutations))
        sensors = self._sensors_for(resolved, user, client_id, now)
        bucket = sensors.bucket
        shadow = self.shadow or resolved.shadow
        admitted = []
        throttle_ms = 0
        for n in mutations:
            if bucket.refill(now) >= 0 or shadow:
                admitted.append(True)
                if n:
                    bucket.take(n, now)
                    sensors.record(n, now)
                    self.tap.add(CONTROLLER_MUTATION_RATE, sensors.tags, user, client_id, n)
            else:
                admitted.append(False)
                throttle_ms = max(1, bucket.throttle_time_ms())  # a hair below 0 rounds to 0 ms: still rejected
        if shadow:
            throttle_ms = bucket.throttle_time_ms()
        sensors.last_record_ms = now  # asking is using: a client refused while in debt is not evicted for idling
        if throttle_ms <= 0:
            return Admission(tuple(admitted))
        if shadow:  # an applied throttle is counted once settled (record_throttle), as the client is told it
            sensors.record_throttle(throttle_ms, shadow)
        return Admission(tuple(admitted), Throttle(throttle_ms, min(throttle_ms, self.max_mute_ms), shadow))

    def record_and_decide(self, user: str, client_id: str, value: float, now_ms: int | None = None) -> Decision:
        """Permissive: record ``value`` mutations, then throttle for ``-K / R`` if that left ``K < 0``."""
        now = self._now(now_ms)
        resolved = self.resolve(user, client_id)
        if resolved.unlimited:
            return FORWARD
        sensors = self._sensors_for(resolved, user, client_id, now)
        sensors.bucket.take(value, now)
        sensors.record(value, now)
        self.tap.add(CONTROLLER_MUTATION_RATE, sensors.tags, user, client_id, value)
        throttle_ms = sensors.bucket.throttle_time_ms()
        if throttle_ms <= 0:
            return FORWARD
        shadow = self.shadow or resolved.shadow
        if shadow:  # an applied throttle is counted once settled (record_throttle)
            sensors.record_throttle(throttle_ms, shadow)
        return Throttle(throttle_ms, min(throttle_ms, self.max_mute_ms), shadow)

    def record_throttle(
        self, user: str, client_id: str, throttle_ms: int, now_ms: int | None = None, refused: bool = False
    ) -> None:
        """Count an applied throttle as the client was told it: the one decided at admission once the broker's
        answer has settled the charge (refunds and the time at the broker taken off), or the decided one when the
        proxy answered the request itself. A throttle settled to 0 is not counted, unless the request was
        ``refused`` some topics (THROTTLING_QUOTA_EXCEEDED): that request was throttled however long the broker
        took with the rest. (Shadow throttles are counted when decided: nothing is told or settled.)"""
        if throttle_ms <= 0 and not refused:
            return
        resolved = self.resolve(user, client_id)
        if resolved.unlimited:
            return
        self._sensors_for(resolved, user, client_id, self._now(now_ms)).record_throttle(throttle_ms, refused=refused)

    def record(self, user: str, client_id: str, value: float, now_ms: int | None = None) -> None:
        """Take ``value`` tokens without deciding anything (a count learnt after admission)."""
        now = self._now(now_ms)
        resolved = self.resolve(user, client_id)
        if resolved.unlimited or value <= 0:
            return
        sensors = self._sensors_for(resolved, user, client_id, now)
        sensors.bucket.take(value, now)
        sensors.record(value, now)
        self.tap.add(CONTROLLER_MUTATION_RATE, sensors.tags, user, client_id, value)

    def refund(self, user: str, client_id: str, value: float, now_ms: int | None = None) -> None:
        """Give back ``value`` tokens taken at admission for topics the broker did not create, delete or extend
        (Kafka charges only what it does). The bucket never goes above its burst. The sampled ``rate`` and the
        totals keep what was admitted (a counter never goes down)."""
        resolved = self.resolve(user, client_id)
        if resolved.unlimited or value <= 0:
            return
        sensors = self._bucket_of(resolved)
        if sensors is not None:  # else dropped since: a new bucket starts full anyway
            sensors.bucket.give_back(value, self._now(now_ms))
            self.tap.add(CONTROLLER_MUTATION_RATE, sensors.tags, user, client_id, -value)

    def record_remote(self, user: str, client_id: str, value: float, now_ms: int, peer: str = "") -> None:
        """A peer's net tokens (:mod:`quota.sharing.remote_usage`): taken from this client's bucket (given back when
        negative, at most what ``peer`` charged it lately: :mod:`quota.primitives.peer_refunds`), deciding
        nothing."""
        resolved = self.resolve(user, client_id)
        if resolved.unlimited:
            return
        value = self.peer_refunds.judge(peer, (user, client_id), value, now_ms)
        sensors = self.keeper.at(resolved, user, client_id, now_ms)
        if value >= 0:
            sensors.bucket.take(value, now_ms)
            sensors.record_remote(value, now_ms)
        else:
            sensors.bucket.give_back(-value, now_ms)

    def tokens(self, user: str, client_id: str, now_ms: int | None = None) -> float:
        """The tokens in this client's bucket now (``math.inf`` when no quota applies; the burst before any use)."""
        resolved = self.resolve(user, client_id)
        if resolved.unlimited:
            return math.inf
        sensors = self._bucket_of(resolved)
        if sensors is None:
            return _burst(resolved.limit, self.window)
        return sensors.bucket.refill(self._now(now_ms))

    def buckets(self, now_ms: int | None = None) -> list[tuple[EntityStats, float]]:
        """Each live sensor's stats with its tokens now (for metrics, off the hot path)."""
        now = self._now(now_ms)
        return [(s.stats(now), s.bucket.peek(now)) for s in self.keeper.snapshot()]

    def top_buckets(
        self, n: int, now_ms: int | None = None, pause: Callable[[], None] = no_pause
    ) -> tuple[list[tuple[EntityStats, float]], EntityStats | None]:
        """:meth:`buckets` of the ``n - 1`` busiest sensors (by mutations recorded) and the rest summed as one, as
        :meth:`top_stats` (None when nothing is left over). Changes nothing: a scrape may call it from a thread."""
        now = self._now(now_ms)
        top, other = self.keeper.top(n, now, pause)
        return [(s.stats(now), s.bucket.peek(now)) for s in top], other

    def _seed_bucket(self, sensors: ClientSensors) -> TokenBucket:  # a restarted worker's seed carries it
        assert isinstance(sensors, MutationSensors)  # this keeper's sensors_class
        return sensors.bucket

    def _seed_tokens(self, sensors: ClientSensors, tokens: float, now: int) -> None:
        assert isinstance(sensors, MutationSensors)
        sensors.bucket.at_most(tokens, now)

    def _bucket_of(self, resolved: ResolvedQuota) -> MutationSensors | None:
        """The live bucket ``resolved``'s entity is counted in: its own, else (past ``max_tracked_entities``) its
        quota's ``<overflow>`` one; None when neither lives."""
        return self.keeper.counted_in(resolved)

    def _sensors_for(self, resolved: ResolvedQuota, user: str, client_id: str, now: int) -> MutationSensors:
        sensors = self.keeper.at(resolved, user, client_id, now)
        self._count(sensors, user, client_id, 0.0, now)
        return sensors
