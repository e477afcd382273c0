"""Byte-rate quotas per (user, client-id): Kafka's ``ClientQuotaManager`` (KIP-13, KIP-55), as a pure object.

One manager per quota type: ``producer_byte_rate`` counts produce request bytes, ``consumer_byte_rate`` counts fetch
response bytes. The manager records, measures and decides; ``proxy/`` delays, mutes and rewrites.

Behaviour carried over from apache/kafka (``ClientQuotaManager``, ``Sensor``, ``QuotaUtils``):

* Record first, then check: ``Sensor.record(value, now, checkQuotas=true)`` adds the value to the rate and only
  then measures it; within quota while ``rate <= limit``.
* Over quota, the throttle time is ``(rate - limit) / limit * windowSize(now)`` (:mod:`quota.primitives.throttle`).
  Kafka does not cap it for byte-rate quotas; this manager caps it at ``max_throttle_time_ms`` (default the whole
  sampled window, ``quota.window.num * quota.window.size.seconds``) so a muted client is never held past its request
  timeout.
* ``max_value_in_quota_window``: ``limit * (quota.window.num - 1) * quota.window.size.seconds``, the largest value
  that can be recorded without certain throttling; Kafka caps a consumer's Fetch ``max_bytes`` with it.
* Quota changes apply to live sensors at once (``updateQuotaMetricConfigs``).
* A sensor with no record for an hour is dropped (``INACTIVE_SENSOR_EXPIRATION_TIME_SECONDS = 3600``, expired when
  ``now - lastRecord > expiration``), so memory is bounded by the clients seen in the last hour.

The sensors themselves (one per quota tag pair: lookup, making, expiry, and their limits kept true to the table) are
the manager's :class:`~quota.primitives.sensor_keeper.SensorKeeper`, ``keeper``. Beyond Kafka, they are bounded
(``max_tracked_entities``, ``quota.max.tracked.entities``): past the cap a new entity is counted in its quota's one
overflow sensor (:mod:`quota.primitives.overflow`), local and peers' usage alike.

Beyond Kafka, ``smoothing`` (``quota.smoothing: on``) has a token bucket per entity decide the throttle instead of
the sampled rate (which is still recorded, for metrics): many short delays instead of Kafka's stop-and-go; see
:mod:`quota.primitives.smoothing`. It may be switched either way on a live manager.

Accuracy, as simulated in ``tests/quota/managers/test_steady_state.py`` with a client that sends whenever it is not
muted: the long-run rate is within 1% of the quota, but because samples only start when something is recorded and a
burst sample leaves the window all at once, the rate over any one minute swings between about 0.91x and 1.10x of the
quota for aggressive clients (tiny gaps between large batches). This is Kafka's algorithm, reproduced as is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from quota.managers.hot_paths import HotPaths
from quota.primitives import smoothing
from quota.primitives.clock import Clock
from quota.primitives.decision import FORWARD, Decision, Throttle
from quota.primitives.entity import ResolvedQuota
from quota.primitives.overflow import DEFAULT_MAX_TRACKED_ENTITIES
from quota.primitives.quota_lookup import QuotaLookup
from quota.primitives.rate import QuotaWindow
from quota.primitives.sensor import ClientSensors, EntityStats
from quota.primitives.sensor_keeper import RECORD_EXPIRY_BATCH, SensorKeeper
from quota.primitives.throttle import INT32_MAX, bounded_throttle_time_ms, quota_acceptable
from quota.primitives.token_bucket import TokenBucket
from quota.primitives.top import no_pause
from quota.primitives.usage_tap import NO_TAP, NoTap

INACTIVE_SENSOR_EXPIRATION_MS = 3_600_000
"""Kafka purges quota sensors after one hour without a record."""


class ClientQuotaManager(HotPaths):
    """Sampled-rate quota for one key (``producer_byte_rate`` or ``consumer_byte_rate``) per (user, client-id).

    Every method that needs the time takes an optional ``now_ms``; without it the injected ``clock`` is read.
    Cost per call is a bounded number of dict lookups plus one ``Rate`` measurement (at most
    ``quota.window.num + 1`` samples), whatever the number of configured entities or active clients.
    """

    sensors_class = ClientSensors  # what one tag pair's state is (a subclass may add to it)
    # read per request by the connection extension (slots, read by offset at each call site: shadow by a Fetch's
    # reuse key, enabled by Produce's byte-rate stage); the rest in the dict
    __slots__ = ("shadow", "enabled", "__dict__")

    def __init__(
        self,
        quotas: QuotaLookup,
        quota_key: str,
        clock: Clock,
        window: QuotaWindow = QuotaWindow(),
        max_throttle_time_ms: int | None = None,
        *,
        shadow: bool = False,
        smoothing: bool = False,
        inactive_sensor_expiration_ms: int = INACTIVE_SENSOR_EXPIRATION_MS,
        max_tracked_entities: int = DEFAULT_MAX_TRACKED_ENTITIES,
    ) -> None:
        if max_throttle_time_ms is not None and max_throttle_time_ms < 0:
            raise ValueError(f"max_throttle_time_ms must be >= 0, got {max_throttle_time_ms}")
        self.quota_key = quota_key
        self.tap: NoTap = NO_TAP  # where local usage is also told when usage is shared with peers (quota.sharing)
        self.enabled = quota_key in quotas.keys()
        self._clock = clock
        self.window = window
        self.max_throttle_time_ms = window.span_ms if max_throttle_time_ms is None else max_throttle_time_ms
        self.shadow = shadow
        # quota.smoothing: on: a token bucket per entity decides the throttle (quota.smoothing); may change live
        self.smoothing = smoothing
        # The sensors by tags: lookup, overflow past max_tracked_entities, expiry, the table's version.
        self.keeper: SensorKeeper[ClientSensors] = SensorKeeper(
            quotas, quota_key, window, self.sensors_class, inactive_sensor_expiration_ms, max_tracked_entities
        )

    # -- quota table (``enabled``: some entity has a quota for this key; when none does, Kafka records nothing at all,
    # ``quotasEnabled``, and callers check it first so traffic without quotas costs one attribute read) ------------

    @property
    def quotas(self) -> QuotaLookup:
        return self.keeper.quotas

    def resolve(self, user: str, client_id: str) -> ResolvedQuota:
        """The quota that applies to this user and client-id, and the tags of the sensor it is counted in."""
        return self.keeper.resolve(user, client_id)

    def applies(self, user: str, client_id: str) -> tuple[bool, bool]:
        """(a quota applies to this client, and it is a shadow one) as :meth:`resolve` says, read from the client's
        sensor when it holds what the table resolves for it (:meth:`SensorKeeper.known`): nothing resolved again for
        each request of a known client."""
        sensors = self.keeper.known(user, client_id)
        if sensors is not None:
            return sensors.entity is not None, sensors.shadow
        resolved = self.resolve(user, client_id)
        return not resolved.unlimited, resolved.shadow

    def update_quotas(self, quotas: QuotaLookup) -> None:
        """Swap in a new quota table: existing sensors take their new limit now (``updateQuotaMetricConfigs``), a
        client whose tags change moves to a sensor of its new tags (:meth:`SensorKeeper.update_quotas`)."""
        self.enabled = self.quota_key in quotas.keys()
        self.keeper.update_quotas(quotas, self._clock.now_ms)

    @property
    def overflowed(self) -> int:
        """Records (local and peers') of entities counted in an overflow sensor for want of room."""
        return self.keeper.overflowed

    # -- recording -----------------------------------------------------------------------------------------------

    def record_and_get_throttle_time_ms(
        self, user: str, client_id: str, value: float, now_ms: int | None = None
    ) -> int:
        """Record ``value`` (bytes) for this client, then return the throttle time in ms (0 when within quota):
        Kafka's ``recordAndGetThrottleTimeMs``, bounded by ``max_throttle_time_ms``. The throttle is counted in the
        entity's stats (with the shadow ones when a shadow quota decided it), and returned even for shadow quotas
        (:meth:`record_and_decide` gives a decision that carries the shadow flag)."""
        now = self._now(now_ms)
        sensors = self.keeper.for_record(user, client_id, now)
        self._count(sensors, user, client_id, value, now)
        return self._decide(sensors, now)[0]

    # record_and_decide(user, client_id, value, now_ms=None) -> Decision: the hot paths' (quota.managers.hot_paths)

    def decided(self, sensors: ClientSensors, now: int) -> Decision:
        """The decision on what was just recorded in ``sensors`` at ``now``, once :meth:`record_and_decide` found it
        may be over the quota: :data:`FORWARD` or a :class:`Throttle` (marked ``shadow`` if this manager or the
        matched quota entry is in shadow mode)."""
        throttle, observed = self._decide(sensors, now)
        if throttle <= 0:
            return FORWARD
        return Throttle(
            throttle_time_ms=throttle,
            mute_ms=throttle,
            shadow=self.shadow or sensors.shadow,
            bound=sensors.limit,
            observed_rate=observed,
        )

    def record_no_throttle(self, user: str, client_id: str, value: float, now_ms: int | None = None) -> None:
        """Record without checking (``recordNoThrottle``): the next checked record pays for it."""
        now = self._now(now_ms)
        self._count(self.keeper.for_record(user, client_id, now), user, client_id, value, now)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int | None = None) -> None:
        """Take back a recorded value by recording ``-value`` (``unrecordQuotaSensor``), e.g. for a fetch answered
        empty because it was throttled."""
        self.record_no_throttle(user, client_id, -value, now_ms)

    # -- pre-checks ----------------------------------------------------------------------------------------------

    def max_value_in_quota_window(self, user: str, client_id: str) -> float:
        """``limit * (num - 1) * window size``: recording more is always throttled, even after a quiet window.

        Kafka's ``getMaxValueInQuotaWindow``; ``math.inf`` when no quota applies.
        """
        known = self.keeper.known(user, client_id)
        return self._ceiling(self.resolve(user, client_id).limit if known is None else known.limit)

    def _ceiling(self, limit: float) -> float:
        return math.inf if math.isinf(limit) else limit * (self.window.num - 1) * self.window.size_seconds

    def cap_to_quota_window(self, user: str, client_id: str, requested: int) -> int:
        """``min(requested, max_value_in_quota_window)`` as an INT32, as Kafka caps a consumer's Fetch ``max_bytes``."""
        cap = self.max_value_in_quota_window(user, client_id)
        return min(requested, INT32_MAX if cap >= INT32_MAX else int(cap))

    def remaining_in_quota_window(self, user: str, client_id: str, now_ms: int | None = None) -> float:
        """About how much can be recorded right now without a throttle: ``limit * windowSize(now) - total(now)``.

        Never negative and never above :meth:`max_value_in_quota_window`. An estimate: recording may start a new
        sample and change the window. ``math.inf`` when no quota applies. Reads, never creates, a sensor.
        """
        sensors = self.keeper.known(user, client_id)
        if sensors is None:
            resolved = self.resolve(user, client_id)
            if resolved.unlimited:
                return math.inf
            limit = resolved.limit
            sensors = self.keeper.get(resolved.tags)
        elif sensors.entity is None:
            return math.inf
        else:
            limit = sensors.limit
        ceiling = self._ceiling(limit)
        now = self._now(now_ms)
        if self.smoothing:  # the bucket's tokens (a full bucket for an entity not seen yet)
            bucket = None if sensors is None else sensors.smooth
            return min(smoothing.headroom(bucket, limit, self.window, now), ceiling)
        if sensors is None:
            return ceiling
        return max(0.0, min(sensors.rate.headroom(limit, now), ceiling))

    # remaining_floor(user, client_id) -> float: the hot paths' (quota.managers.hot_paths)

    # -- stats and expiry ----------------------------------------------------------------------------------------

    def stats(self, now_ms: int | None = None) -> list[EntityStats]:
        """A snapshot of every live sensor (off the hot path: cost grows with the number of active clients)."""
        now = self._now(now_ms)
        return [sensors.stats(now) for sensors in self.keeper.snapshot()]

    def top_stats(
        self, n: int, now_ms: int | None = None, pause: Callable[[], None] = no_pause
    ) -> tuple[list[EntityStats], EntityStats | None]:
        """The stats of the ``n - 1`` busiest sensors (by value recorded), and the rest summed as one (None when
        nothing is left over; every sensor's own stats when there are ``n`` or fewer). Cost: a selection over the
        sensors plus ``n`` measurements; the summed rest has no rate (it would cost a measurement each). Changes
        nothing, so a scrape may call it from a thread other than the one that records, with a ``pause`` that lets
        the recording thread run between chunks of the work (see :mod:`quota.primitives.top`)."""
        now = self._now(now_ms)
        top, other = self.top_sensors(n, now, pause)
        return [s.stats(now) for s in top], other

    def top_sensors(
        self, n: int, now_ms: int | None = None, pause: Callable[[], None] = no_pause
    ) -> tuple[list[ClientSensors], EntityStats | None]:
        """As :meth:`top_stats`, the busiest sensors themselves (a subclass reads more of them)."""
        return self.keeper.top(n, self._now(now_ms), pause)

    def stats_for(self, user: str, client_id: str, now_ms: int | None = None) -> EntityStats | None:
        """The stats of the sensor this client is counted in, or ``None`` if it has none yet."""
        sensors = self.keeper.get(self.resolve(user, client_id).tags)
        return None if sensors is None else sensors.stats(self._now(now_ms))

    def expire_idle_sensors(self, now_ms: int | None = None, limit: int | None = None) -> int:
        """Drop sensors with no record for longer than the expiration, at most ``limit``, the oldest first (done on every
        record too, :data:`RECORD_EXPIRY_BATCH` at a time: only needed to free memory when idle); how many dropped."""
        return self.keeper.expire(self._now(now_ms), limit)

    def __len__(self) -> int:
        """The number of live sensors."""
        return len(self.keeper)

    # -- internals -----------------------------------------------------------------------------------------------

    def _now(self, now_ms: int | None) -> int:
        return self._clock.now_ms() if now_ms is None else now_ms

    def _decide(self, sensors: ClientSensors, now: int) -> tuple[int, float]:
        """The throttle for what was just recorded in ``sensors`` (0 within quota), counted in its stats, and the
        rate it was decided on (0.0 when the sampled rate did not decide it)."""
        if sensors.entity is None:  # no quota applies
            return 0, 0.0
        if sensors.smooth is not None and self.smoothing:
            shadow = self.shadow or sensors.shadow
            throttle = smoothing.throttle_time_ms(sensors.smooth, self.max_throttle_time_ms, shadow)
            sensors.record_throttle(throttle, shadow)
            return throttle, 0.0
        limit = sensors.limit
        if sensors.rate.surely_within(limit, now):  # far below the quota: within it, not measured
            return 0, 0.0
        observed = sensors.rate.measure(now)
        if quota_acceptable(observed, limit):
            return 0, observed
        window_ms = sensors.rate.window_size_ms(now)
        throttle = max(0, bounded_throttle_time_ms(observed, limit, window_ms, self.max_throttle_time_ms))
        sensors.record_throttle(throttle, self.shadow or sensors.shadow)
        return throttle, observed

    def record_remote(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """A peer's usage (:mod:`quota.sharing.remote_usage`): counted in the rate this client's quota is checked against,
        deciding nothing, not in this process's totals."""
        sensors = self.keeper.for_remote(user, client_id, now_ms)
        if sensors is not None:
            sensors.record_remote(value, now_ms)
            self._smooth(sensors, sensors.limit, value, now_ms)

    def record_remote_rows(
        self, users: Sequence[str], client_ids: Sequence[str], values: Sequence[float], now_ms: int
    ) -> None:
        """:meth:`record_remote` for each row of three columns (a peer's record: 10^5 rows and more), with the same
        effect, at less cost for a row whose sensor is known: a peer names each row by its quota tags, so once the
        client the tags name has resolved to them (under this quota table, and the sensor's limit not changed since)
        the row goes to that sensor without resolving again, as :meth:`SensorKeeper.known` lets a local client's
        record."""
        keeper = self.keeper
        table, version, expiration = keeper.table, keeper.version, keeper.expiration_ms
        for user, client_id, value in zip(users, client_ids, values):
            sensors = table.sensors.get((user, client_id))  # type: ignore[call-overload]  # a tuple finds its QuotaTags
            if (
                sensors is None or sensors.resolved_version != version or now_ms - sensors.last_record_ms > expiration
            ):  # one that expiry may drop: made again there
                self.record_remote(user, client_id, value, now_ms)
                continue
            if now_ms > table.due_ms:  # as keeper.at does (it cannot drop this sensor: recorded within the hour)
                table.expire(now_ms, RECORD_EXPIRY_BATCH)
            table.touch(sensors, now_ms)
            sensors.record_remote(value, now_ms)
            self._smooth(sensors, sensors.limit, value, now_ms)

    def seed_rows(
        self, now_ms: int, max_rows: int
    ) -> list[tuple[str, str, list[tuple[int, int, float]], float | None]]:
        """What a restarted peer needs to start where this one is: ``(user, client_id, samples, tokens)`` by quota
        tags for the ``max_rows`` quota'd sensors with the most in their window
        (:meth:`quota.primitives.rate.Rate.samples`) plus what their bucket lacks (``tokens``: the smoothing or mutation bucket's now, None without one)."""
        rows: list[tuple[str, str, list[tuple[int, int, float]], float | None]] = []
        weights: list[float] = []
        for s in list(self.keeper.by_tags.values()):
            if s.entity is None:
                continue
            samples, bucket = s.rate.samples(now_ms), self._seed_bucket(s)
            tokens = None if bucket is None else bucket.peek(now_ms)
            deficit = 0.0 if bucket is None or tokens is None else bucket.burst - tokens
            if samples or deficit > 0:
                rows.append((s.tags.user, s.tags.client_id, samples, tokens))
                weights.append(sum(v for _, _, v in samples) + deficit)
        if len(rows) > max_rows:
            order = sorted(range(len(rows)), key=weights.__getitem__, reverse=True)[:max_rows]
            rows = [rows[i] for i in order]
        return rows

    def seed(self, rows: Iterable[Sequence[Any]], now_ms: int) -> None:
        """A peer's :meth:`seed_rows`: each entity's rate starts from the peer's samples and its bucket holds no
        more than the peer's (deciding nothing, not in this process's totals, as :meth:`record_remote`)."""
        for row in rows:
            user, client_id, samples = row[0], row[1], row[2]
            resolved = self.resolve(user, client_id)
            if not resolved.unlimited:
                sensors = self.keeper.at(resolved, user, client_id, now_ms)
                sensors.rate.seed(samples, now_ms)
                sensors.last_record_ms = now_ms
                if len(row) > 3 and row[3] is not None:
                    self._seed_tokens(sensors, float(row[3]), now_ms)

    def _seed_bucket(self, sensors: ClientSensors) -> TokenBucket | None:
        """The token bucket a seed carries for ``sensors``: smoothing's while it is on."""
        return sensors.smooth if self.smoothing else None

    def _seed_tokens(self, sensors: ClientSensors, tokens: float, now: int) -> None:
        if self.smoothing and not math.isinf(sensors.limit):
            bucket = sensors.smooth
            if bucket is None:
                bucket = sensors.smooth = smoothing.new_bucket(sensors.limit, self.window, now)
            if bucket is not None:  # None only for an unlimited quota
                bucket.at_most(tokens, now)

    def _count(self, sensors: ClientSensors, user: str, client_id: str, value: float, now: int) -> None:
        sensors.record(value, now)
        if self.tap is not NO_TAP and sensors.entity is not None:  # with no quota: for its metrics only, not shared
            self.tap.add(self.quota_key, sensors.tags, user, client_id, value, sensors.limit)
        if self.smoothing:
            self._smooth(sensors, sensors.limit, value, now)

    def _smooth(self, sensors: ClientSensors, limit: float, value: float, now: int) -> None:
        """With smoothing on, ``value`` taken from (or, negative, given back to) the entity's bucket."""
        if self.smoothing and not math.isinf(limit):
            bucket = sensors.smooth
            if bucket is None:
                bucket = sensors.smooth = smoothing.new_bucket(limit, self.window, now)
            if bucket is not None:  # None only for an unlimited quota
                smoothing.take(bucket, value, now)

    def __repr__(self) -> str:
        return (
            f"ClientQuotaManager(quota_key={self.quota_key!r}, window={self.window!r}, "
            f"max_throttle_time_ms={self.max_throttle_time_ms}, smoothing={self.smoothing}, "
            f"sensors={len(self.keeper)})"
        )
