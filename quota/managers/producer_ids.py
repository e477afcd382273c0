"""The active producer-id quota (KIP-936): per user, a time-controlled bloom filter and a token bucket. Pure.

No Kafka release implements KIP-936; this follows its design, states where its text is loose, and goes further
where the proxy can protect the broker better than the KIP's after-the-fact throttle.

**The cache** (:mod:`quota.managers.producer_id_cache`, one :class:`TimeControlledBloomFilter` per user, its filters exact
while they hold few PIDs, bloom filters past that): the KIP's four steps; a PID is counted again only after it was
not seen for at least half a window (at most a whole one). A user's cache, bucket and counters are one object, keyed
by the user's name, which also keeps the quota resolved for it until the table changes, so a Produce of a known user
is one dictionary lookup before its filter is read. A user with no live filter is dropped by
:meth:`ProducerIdQuotaManager.cleanup` (the KIP's cleanup scheduler, every ``producer.id.quota.cache.cleanup.
scheduler.interval.ms``) once its token bucket is full again: the bucket outlives the filters, or a user exhausted
and then idle for one window would come back to a full burst (``rate x num`` new ids at once), not what refilled.
Past ``quota.max.tracked.entities`` users, a new one under a ``<default>`` quota still gets a state of its own: one
not asked about lately is evicted, what it owed carried, and the new one starts with one token, no burst
(:mod:`quota.managers.producer_id_eviction`, issue 44), so a flood of users never takes a newcomer's ids away.

**The quota**. ``producer_ids_rate`` is, as the KIP's ``kafka-configs`` examples read, the number of new PIDs a
user may start per window W (``producer.id.quota.window.size.seconds``). It is enforced with KIP-599's token bucket
(the KIP says "similar to ControllerMutation quota"): tokens refill at ``producer_ids_rate / W`` per second up to
a burst of ``producer_ids_rate * producer.id.quota.window.num``; each new PID takes one token. Quotas are on
``user`` entities only (and ``<default>``), as the KIP says; a PID is counted on Produce, where the KIP counts it.
What happens to a new PID the bucket has no token for depends on ``enforcement``
(``producer.id.quota.enforcement``):

- ``throttle`` (the KIP's behaviour): the Produce is forwarded (the broker takes the PID in), and its response
  carries ``throttle_time_ms = -tokens / refill rate`` and the connection is muted for as long, both capped at
  ``max_mute_ms`` (``quota.mute.max.ms``) as the byte-rate throttles are: a client that honours the reported time
  (KIP-219) must not be told to stop past its own timeouts (100 ids an hour, 5 short, is 180 s uncapped, past a
  producer's 120 s ``delivery.timeout.ms``). A client that restarts per message never feels it: the broker has the
  PID already, and the muted connection is one the client is about to close.
- ``hold`` (the default): the PID never reaches the broker before the bucket has a token for it. The PID takes its
  token now (the bucket may go below zero: each PID waiting has its own place, first come first served, whatever
  connection it came on) and the decision is :class:`Hold` until the time the bucket is back at zero, so new PIDs
  reach the broker at the rate, plus the burst. Another Produce bringing a PID while it is held in this process
  (the same producer on another broker's connection) is held until the same time, and not counted again. A held PID
  is known once its hold ends and the request is forwarded, not before (:mod:`quota.managers.producer_id_holds`): a hold
  whose every request is abandoned (their connections closed before it ended,
  :meth:`ProducerIdQuotaManager.abandon`) is released, the PID is not known and its token goes back, here and at
  the peers that share usage. A hold longer than ``max_hold_ms`` (``producer.id.quota.max.hold.ms``, below clients'
  request timeouts) is not made: the decision is :class:`Refuse` (answered with a retriable error), the PID is not
  written into the cache nor charged to the bucket, so the client's retry is judged as new again. The refusal
  reports when a retry could be held no longer than ``max_hold_ms`` (capped at ``max_mute_ms``) and mutes for that
  time at most ``max_mute_ms - max_hold_ms``, so a retry's mute and its hold together stay within ``max_mute_ms``.

Shadow (``quota.mode: shadow`` or a shadow entry) always decides as ``throttle``, marked shadow: nothing is held.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from quota.managers.producer_id_cache import CacheShape
from quota.managers.producer_id_cleanup import UserSweep
from quota.managers.producer_id_decision import Hold as Hold  # the decisions it returns, for its callers
from quota.managers.producer_id_decision import ProducerIdDecision as ProducerIdDecision
from quota.managers.producer_id_decision import Refuse as Refuse
from quota.managers.producer_id_eviction import carry, evict
from quota.managers.producer_id_holds import HoldEnforcement
from quota.managers.producer_id_stats import ProducerIdStats, stats, top_stats
from quota.managers.producer_id_user import ProducerIdUser
from quota.managers.producer_ids_issued import IssuedProducerIds
from quota.primitives.debt_sketch import DebtSketch
from quota.primitives.decision import FORWARD, Throttle
from quota.primitives.entity import DEFAULT, PRODUCER_IDS_RATE, QuotaEntity, ResolvedQuota
from quota.primitives.overflow import DEFAULT_MAX_TRACKED_ENTITIES, overflow_tags
from quota.primitives.peer_refunds import PeerRefunds
from quota.primitives.quota_groups import group_of_tags
from quota.primitives.quota_table import QuotaTable
from quota.primitives.sensor_keeper import MAX_MEMBERS
from quota.primitives.throttle import INT32_MAX
from quota.primitives.token_bucket import TokenBucket
from quota.primitives.top import no_pause, snapshot
from quota.primitives.usage_tap import NO_TAP, NoTap

HOLD, THROTTLE = "hold", "throttle"
ENFORCEMENTS = (HOLD, THROTTLE)
DEFAULT_MAX_HOLD_MS = 10_000


class ProducerIdQuotaManager:
    """``producer_ids_rate`` per user. Every method takes ``now_ms`` (the clock is the caller's). ``max_mute_ms``
    caps both the reported ``throttle_time_ms`` and the mute; ``enforcement`` is :data:`THROTTLE` (the KIP's) or
    :data:`HOLD` (new PIDs held before the broker sees them, at most ``max_hold_ms``)."""

    tap: NoTap = NO_TAP  # where new ids are also told when usage is shared with peers (quota.sharing.usage_share)
    # read per Produce by the connection extension (slots, read by offset at each call site: its header parser and
    # the producer-id stage); the rest in the dict
    __slots__ = ("enabled", "recheck_ms", "__dict__")

    def __init__(
        self,
        quotas: QuotaTable,
        *,
        window_num: int = 11,
        window_size_s: int = 3600,
        expected_pids: int = 1000,
        false_positive_rate: float = 0.001,
        max_mute_ms: int = INT32_MAX,
        shadow: bool = False,
        enforcement: str = THROTTLE,
        max_hold_ms: int = DEFAULT_MAX_HOLD_MS,
        max_tracked_entities: int = DEFAULT_MAX_TRACKED_ENTITIES,
    ) -> None:
        if enforcement not in ENFORCEMENTS:
            raise ValueError(f"enforcement must be one of {', '.join(ENFORCEMENTS)}, got {enforcement!r}")
        self.enforcement = enforcement
        self.holds = HoldEnforcement(max_hold_ms, max_mute_ms)  # the hold (enforcement hold) and its bounds
        self.window_num, self.window_size_s = window_num, window_size_s
        self.expected_pids, self.false_positive_rate = expected_pids, false_positive_rate
        self.shadow = shadow
        self.recheck_ms = window_size_s * 1000 // 4  # a caller may skip a PID it checked less than this ago
        self.new_pids_counted = 0  # new producer ids counted so far, all users (a caller's before/after says "new")
        self._shape = CacheShape(window_size_s * 1000, expected_pids, false_positive_rate)
        self._users: dict[str, ProducerIdUser] = {}  # by the user of the tags resolved (client-id is always "")
        self._sweep = UserSweep()  # the KIP's cleanup, a batch at a time
        # Past this many users a new one under a <default> quota evicts one (quota.managers.producer_id_eviction, as
        # the byte-rate quotas' sensors; quota.max.tracked.entities); may change live.
        self.max_tracked_entities = max_tracked_entities
        self.overflowed = 0  # users evicted to make room for new ones (local decisions and peers' records)
        self.debts = DebtSketch(window_num * window_size_s * 1000)  # what evicted users still owe
        self.peer_refunds = PeerRefunds()  # what each peer may give back: what it charged (issue 44, T8)
        self.issued = IssuedProducerIds()  # attribution of InitProducerId answers (metrics, not the quota)
        self._quotas = quotas
        self._members: dict[str, ProducerIdUser] = {}  # a quota group's member -> its group's state (this table's)
        self.update_quotas(quotas)

    @property
    def max_hold_ms(self) -> int:
        return self.holds.max_hold_ms

    @property
    def max_mute_ms(self) -> int:
        return self.holds.max_mute_ms

    def update_quotas(self, quotas: QuotaTable) -> None:
        """A new table: each user's limit is the one that now applies (``inf`` once no entry covers the user; its
        bucket keeps its shape until a limit applies again, and nothing is counted meanwhile)."""
        changed = quotas.changes_since(self._quotas)
        self._quotas = quotas
        self._members = {}  # every member resolves again
        self.enabled = PRODUCER_IDS_RATE in quotas.keys()
        reached = (
            self._users.items() if changed is None or len(changed) >= len(self._users) else self._reached_by(changed)
        )
        for user, state in reached:
            resolved = quotas.resolve(PRODUCER_IDS_RATE, user, "")
            limit = resolved.limit
            state.shadow, state.fast = resolved.shadow, _fast(resolved, user)
            if limit != state.limit:
                state.limit = limit
                if not math.isinf(limit):
                    state.bucket.reconfigure(*self._bucket_shape(limit), state.bucket._last_ms)

    def _reached_by(self, changed: Iterable[QuotaEntity]) -> list[tuple[str, ProducerIdUser]]:
        """The users whose resolution a changed entity can change: a named user's own; every user for a default (an
        entity with a named client-id other than "" never matches, users are resolved with client-id "")."""
        reached = []
        for entity in changed:
            if entity.user is not None and entity.user != DEFAULT:
                state = self._users.get(entity.user)
                if state is not None:
                    reached.append((entity.user, state))
            elif entity.client_id is None or entity.client_id == DEFAULT or entity.client_id == "":
                return list(self._users.items())
        return reached

    def _bucket_shape(self, limit: float) -> tuple[float, float]:
        return limit / self.window_size_s, limit * self.window_num

    def record_and_decide(self, user: str, pid: int, now_ms: int, may_hold: bool = True) -> ProducerIdDecision:
        """A Produce from ``user`` with producer id ``pid`` (>= 0): count it if new; throttle (``throttle``), or
        hold or refuse (``hold``), when over quota. A :class:`Hold`'s PID is counted: do not ask again for the
        request when it is let through; a :class:`Refuse`'s is not. ``may_hold`` False (the request would not fit
        in the held-byte bounds): what would be a hold is a :class:`Refuse` instead (``no_room``), nothing counted,
        reporting the time the hold would have lasted."""
        state = self._known(user)
        if state is None or not state.fast:  # resolve: user entities only, client-id is ignored
            state = self.state_for(user, now_ms)
            if state is None:
                return FORWARD
        else:
            state.last_ms = now_ms  # in use: a full table evicts others first
        shadow = self.shadow or state.shadow
        if state.holding:
            self.holds.release_past(state, now_ms, self.tap)
            held = state.holding.get(pid)
            if held is not None:  # counted already: through at the same time (this producer on another connection)
                if shadow:
                    return FORWARD
                if not may_hold:
                    return self.holds.no_room(state, held[0] - now_ms)
                held[1] += 1
                return Hold(held[0], tags=state.tags)
        if state.seen(pid, now_ms):
            return FORWARD
        bucket = state.bucket
        if self.enforcement == HOLD and not shadow:
            decision = self.holds.hold(state, pid, now_ms, may_hold, self.tap)
            if not isinstance(decision, Refuse):
                self._counted(state, 1)
            return decision
        state.add(pid, now_ms)
        self._counted(state, 1)
        self.tap.producer_id(state.user, pid)
        bucket.take(1, now_ms)
        return self._throttled(state, bucket, shadow)

    def record_and_decide_all(
        self, user: str, pids: tuple[int, ...], now_ms: int, may_hold: bool = True
    ) -> ProducerIdDecision:
        """A Produce from ``user`` whose batches carry the distinct producer ids ``pids`` (each >= 0; more than one
        only from a crafted request: a producer has one): :meth:`record_and_decide` for all of them at once. Every
        new PID takes a token; under ``hold`` the request waits until the bucket has them all (and for any PID held
        already), or is refused, none of them counted, when that is past ``max_hold_ms``. The work is one cache
        lookup per PID; under ``hold`` it stops at the first PID past what a hold could admit."""
        if len(pids) == 1:
            return self.record_and_decide(user, pids[0], now_ms, may_hold)
        state = self._known(user)
        if state is None or not state.fast:
            state = self.state_for(user, now_ms)
            if state is None:
                return FORWARD
        else:
            state.last_ms = now_ms
        shadow = self.shadow or state.shadow
        hold = self.enforcement == HOLD and not shadow
        holding = state.holding
        if holding:
            self.holds.release_past(state, now_ms, self.tap)
        bucket = state.bucket
        bucket.refill(now_ms)
        admissible = self.holds.admissible(state)
        new: list[int] = []
        waits: list[tuple[int, int]] = []
        for pid in pids:
            held = holding.get(pid) if holding else None
            if held is not None:
                if not shadow:
                    waits.append((pid, held[0]))
            elif not state.seen(pid, now_ms):
                new.append(pid)
                if hold and len(new) > admissible:
                    break
        if not new and not waits:
            return FORWARD
        if hold:
            decision = self.holds.hold_all(state, new, waits, now_ms, may_hold, self.tap)
            if not isinstance(decision, Refuse):
                self._counted(state, len(new))
            return decision
        for pid in new:
            state.add(pid, now_ms)
            self.tap.producer_id(state.user, pid)
        self._counted(state, len(new))
        if not new:
            return FORWARD
        bucket.take(len(new), now_ms)
        return self._throttled(state, bucket, shadow)

    def _throttled(self, state: ProducerIdUser, bucket: TokenBucket, shadow: bool) -> ProducerIdDecision:
        """The throttle mode's answer once the new ids' tokens are taken: the bucket's debt as throttle (reported
        and muted for: both capped at max_mute_ms), counted as applied or shadow."""
        throttle_ms = min(bucket.throttle_time_ms(), self.max_mute_ms)
        if throttle_ms <= 0:
            return FORWARD
        if shadow:
            state.shadow_throttle_ms_total += throttle_ms
            state.shadow_throttled += 1
        else:
            state.throttle_ms_total += throttle_ms
            state.throttled += 1
        return Throttle(throttle_ms, throttle_ms, shadow)

    def state_for(self, user: str, now_ms: int) -> ProducerIdUser | None:
        """The state ``user``'s producer ids are counted in (made if none), or None when no quota applies. Past
        ``max_tracked_entities`` users, a new one the quota names only as ``<default>`` gets a state all the same:
        room is made by evicting one, its debt carried, and the new one starts with one token at most
        (:mod:`quota.managers.producer_id_eviction`). A user the quota names is always tracked."""
        resolved = self._quotas.resolve(PRODUCER_IDS_RATE, user, "")
        if resolved.unlimited:
            return None
        key = resolved.tags.user
        users = self._users
        state = users.get(key)
        if state is None:
            full = len(users) >= self.max_tracked_entities and overflow_tags(resolved) is not None
            if full and evict(users, self.debts, now_ms) is not None:
                self.overflowed += 1
            bucket = TokenBucket(*self._bucket_shape(resolved.limit), now_ms)
            state = users[key] = ProducerIdUser(key, self._shape, bucket, resolved, _fast(resolved, key))
            state.moved_ms = now_ms
            carry(state, self.debts.remaining_ms(key, now_ms), full, now_ms)
        state.last_ms = now_ms
        if key != user and group_of_tags((key, "")) is not None:  # found by the member's name next time
            if len(self._members) >= MAX_MEMBERS:
                self._members = {}
            self._members[user] = state
        return state

    def _known(self, user: str) -> ProducerIdUser | None:
        """The state ``user``'s ids count in, when known without resolving: its own, or its quota group's."""
        state = self._users.get(user)
        if state is None and self._members:
            state = self._members.get(user)
            if state is not None and self._users.get(state.user) is not state:  # evicted or cleaned up since
                return None
        return state

    def counted_in(self, user: str) -> ProducerIdUser | None:
        """The state ``user``'s new ids are counted in now (None when none lives or no quota applies). Never made,
        nothing counted (``quota.explain`` reads it)."""
        resolved = self._quotas.resolve(PRODUCER_IDS_RATE, user, "")
        return None if resolved.unlimited else self._users.get(resolved.tags.user)

    def record_remote(self, user: str, count: int, pids: tuple[int, ...], now_ms: int, peer: str = "") -> None:
        """A peer counted ``count`` new producer ids of ``user`` (:mod:`quota.sharing.remote_usage`): their tokens are taken
        from the user's bucket, and ``pids``, admitted there, written into its cache, so they are not counted again
        here; nothing is decided and this process's own count of new ids is unchanged. An admitted id this process
        holds as well (the same new producer on two workers' connections) was paid for there: its hold here is
        settled, its token given back here and to the peers (:meth:`HoldEnforcement.settled_elsewhere`). A negative
        ``count`` (holds the peer released) gives back at most what ``peer`` charged the user lately
        (:mod:`quota.primitives.peer_refunds`)."""
        state = self.state_for(user, now_ms)
        if state is None:
            return
        count = int(self.peer_refunds.judge(peer, user, count, now_ms))
        for pid in pids:
            if state.holding and pid in state.holding:
                self.holds.settled_elsewhere(state, pid, now_ms, self.tap)
            if not state.seen(pid, now_ms):
                state.add(pid, now_ms)
        if count >= 0:
            state.bucket.take(count, now_ms)
        else:  # holds the peer released (abandon): their tokens back, never above the burst
            state.bucket.give_back(-count, now_ms)

    def _counted(self, state: ProducerIdUser, n: int) -> None:
        state.new_pids += n
        self.new_pids_counted += n

    def _held_by(self, hold: Hold) -> ProducerIdUser | None:
        """The state whose bucket ``hold`` is in (None once it is gone)."""
        return self._users.get(hold.tags.user) if hold.tags is not None else None

    def admitted(self, hold: Hold, pids: tuple[int, ...], now_ms: int) -> None:
        """A Produce held (``hold``, for ``pids``) is forwarded now: its PIDs reached the broker, so they are known
        from now on, here and at the peers (a hold already ended or released is left as it is)."""
        state = self._held_by(hold)
        if state is not None:
            self.holds.admitted(state, hold, pids, now_ms, self.tap)

    def abandon(self, hold: Hold, pid: int, now_ms: int) -> None:
        """A Produce held for ``pid`` (``hold``, as :meth:`record_and_decide` decided it) will never be forwarded:
        its connection closed. Once no request waits for the PID any more, the hold is released as if never made:
        the PID is not known (a later Produce with it is judged as new) and its token goes back to the bucket
        (never above the burst), so a client that gives up mid-hold does not use up the user's budget. A hold
        already ended (the PID let through) is not undone."""
        self.abandon_all(hold, (pid,), now_ms)

    def abandon_all(self, hold: Hold, pids: tuple[int, ...], now_ms: int) -> None:
        """:meth:`abandon` for every PID a request waits for: ``hold.waits`` when it was decided by
        :meth:`record_and_decide_all` for several, else its one PID in ``pids``."""
        state = self._held_by(hold)
        if state is not None:
            self.holds.abandon_all(state, hold, pids, now_ms, self.tap)

    def cleanup(self, now_ms: int, limit: int | None = None) -> int:
        """The KIP's cleanup (:mod:`quota.managers.producer_id_cleanup`): expired filters disposed of, users a fresh
        one would equal dropped; returns how many. ``limit``: look at that many users at most, going on where the
        last call stopped."""
        dropped, self._users = self._sweep.run(self._users, now_ms, limit, self.holds, self.tap)
        return dropped

    def states(self) -> list[ProducerIdUser]:  # every user's state, a copy (quota.sharing.producer_id_seed reads it)
        return snapshot(self._users)

    def stats(self, now_ms: int) -> list[ProducerIdStats]:
        return [stats(s, now_ms) for s in snapshot(self._users)]

    def top_stats(
        self, n: int, now_ms: int, pause: Callable[[], None] = no_pause
    ) -> tuple[list[ProducerIdStats], ProducerIdStats | None]:
        """The stats of the ``n - 1`` users with the most new producer ids and the rest summed as one (user
        ``__other__``, no limit or tokens; None when nothing is left over), as ``ClientQuotaManager.top_stats``.
        Changes nothing: a scrape may call it from a thread other than the one that records."""
        return top_stats(snapshot(self._users), n, now_ms, pause)

    def __len__(self) -> int:
        return len(self._users)


def _fast(resolved: ResolvedQuota, user: str) -> bool:
    """Whether a request of ``user`` may be decided on its state's limit and shadow, unresolved (keyed by its name)."""
    return not resolved.unlimited and resolved.tags.user == user
