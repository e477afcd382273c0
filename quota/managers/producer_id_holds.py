"""The ``hold`` enforcement of the producer-id quota: new producer ids kept in the proxy until the bucket has their
tokens, refused past ``producer.id.quota.max.hold.ms``, released when their clients leave. Pure.

A held PID takes its token when it is held (the bucket may go below zero: each PID waiting has its own place) and
waits in its user's ``holding`` (PID -> ``[until, requests waiting]``). Its hold ends one of two ways:

- **admitted** (:meth:`HoldEnforcement.admitted`, or found past its time by the next look,
  :meth:`HoldEnforcement.release_past`): the request reached the
  broker; the PID is written into the cache, known from then on, here and (through the tap) at every peer;
- **abandoned** (:meth:`HoldEnforcement.abandon_all`): every request waiting for it was dropped with its connection;
  the PID is not known and its token goes back, here and at the peers.

A PID is *known* only once it was admitted somewhere, never because it is held (issue 35): peers learn a held PID's
token at once (their buckets are charged for it) but the PID itself only when it is admitted. Before, they learnt
both at the hold, so a client could hold an id on one worker, close (its token back), and send the same id to
another worker that had been told it was known: new ids let through at several times the quota, none charged. A
Produce bringing a PID held on another worker or proxy is counted there as new (a second token for one id, at worst
once per process while the first is held): stricter, never looser.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from quota.managers.producer_id_decision import Hold, ProducerIdDecision, Refuse
from quota.managers.producer_id_user import ProducerIdUser
from quota.primitives.decision import FORWARD, Throttle
from quota.primitives.throttle import INT32_MAX
from quota.primitives.usage_tap import NoTap


def wait_ms(tokens: float, rate: float) -> int:
    """How long until a bucket at ``tokens`` refilling ``rate`` per second is back at zero (0 when it is not below;
    INT32_MAX when it never refills), rounded up: a PID let through then finds its token there."""
    if tokens >= 0:
        return 0
    if rate <= 0:
        return INT32_MAX
    return min(INT32_MAX, math.ceil(-tokens / rate * 1000.0))


class HoldEnforcement:
    """The hold of :class:`quota.managers.producer_ids.ProducerIdQuotaManager`'s enforcement ``hold``, bounded by
    ``max_hold_ms`` (a longer one is refused) and ``max_mute_ms`` (a refusal's reported time and mute). The manager
    finds the user's state and passes it, with the ``tap`` its usage is told to; the holds themselves live in the
    state (``holding``). New ids are counted by the manager: every one a decision here does not refuse."""

    __slots__ = ("max_hold_ms", "max_mute_ms")

    def __init__(self, max_hold_ms: int, max_mute_ms: int) -> None:
        if max_hold_ms < 0:
            raise ValueError(f"max_hold_ms must be >= 0, got {max_hold_ms}")
        self.max_hold_ms, self.max_mute_ms = max_hold_ms, max_mute_ms

    def admissible(self, state: ProducerIdUser) -> float:
        """How many new PIDs a hold could take now (the bucket refilled to now by the caller)."""
        bucket = state.bucket
        return bucket.tokens + bucket.rate * self.max_hold_ms / 1000.0

    def hold(self, state: ProducerIdUser, pid: int, now_ms: int, may_hold: bool, tap: NoTap) -> ProducerIdDecision:
        """A new ``pid``: let through now while the bucket has a token for it, held until the bucket is back at
        zero, or refused when that is more than ``max_hold_ms`` away."""
        bucket = state.bucket
        bucket.refill(now_ms)
        wait = wait_ms(bucket.tokens - 1, bucket.rate)
        if wait > self.max_hold_ms:  # not counted, not cached: the retry is judged as new again
            return self._past_bound(state, wait)
        if wait > 0 and not may_hold:
            return self.no_room(state, wait)
        bucket.take(1, now_ms)
        if wait <= 0:
            state.add(pid, now_ms)
            tap.producer_id(state.user, pid)
            return FORWARD
        tap.producer_id_held(state.user)  # the token now; the PID once admitted
        until = now_ms + wait
        if state.holding is None:
            state.holding = {}
        state.holding[pid] = [until, 1]  # written into the cache when the hold ends, not if it is abandoned
        state.held += 1
        state.hold_ms_total += wait
        return Hold(until, tags=state.tags)

    def hold_all(
        self,
        state: ProducerIdUser,
        new: Sequence[int],
        waits: list[tuple[int, int]],
        now_ms: int,
        may_hold: bool,
        tap: NoTap,
    ) -> ProducerIdDecision:
        """:meth:`hold` for a request bringing the ``new`` PIDs and waiting for the held ones in ``waits``: all or
        nothing, so a refused request leaves no PID counted and a held one waits for its last token."""
        bucket = state.bucket
        wait = wait_ms(bucket.tokens - len(new), bucket.rate) if new else 0
        if wait > self.max_hold_ms:
            return self._past_bound(state, wait)
        if not may_hold and (wait > 0 or waits):
            return self.no_room(state, max([wait] + [until - now_ms for _, until in waits]))
        bucket.take(len(new), now_ms)
        holding = state.holding
        if waits:
            assert holding is not None  # a PID waited for is one held
            for pid, _ in waits:
                holding[pid][1] += 1
        if wait <= 0:
            for pid in new:  # their tokens were there: known now (paid for, whatever happens to the request)
                state.add(pid, now_ms)
                tap.producer_id(state.user, pid)
            if not waits:
                return FORWARD
        else:
            until = now_ms + wait
            if holding is None:
                holding = state.holding = {}
            for pid in new:
                tap.producer_id_held(state.user)
                holding[pid] = [until, 1]
                waits.append((pid, until))
            state.held += 1
            state.hold_ms_total += wait
        return Hold(max(until for _, until in waits), tags=state.tags, waits=tuple(waits))

    def _past_bound(self, state: ProducerIdUser, wait: int) -> Refuse:
        """A hold of ``wait`` past ``max_hold_ms``: refused, nothing counted; a retry when it would be held no longer
        than the bound (capped at ``max_mute_ms``), muted at most ``max_mute_ms - max_hold_ms``."""
        retry_ms = min(wait - self.max_hold_ms, self.max_mute_ms)
        return self._refused(state, retry_ms, no_room=False)

    def no_room(self, state: ProducerIdUser, wait: int) -> Refuse:
        """A hold of ``wait`` that fits the time bound but not the held-byte bounds: refused, nothing counted.
        The retry is reported (and muted) for when the hold would have ended, when the bucket has the token (capped
        as any refusal's), so it goes through then rather than coming back to be refused at once."""
        return self._refused(state, min(max(wait, 0), self.max_mute_ms), no_room=True)

    def _refused(self, state: ProducerIdUser, retry_ms: int, no_room: bool) -> Refuse:
        mute_ms = min(retry_ms, max(0, self.max_mute_ms - self.max_hold_ms))
        state.refused += 1
        state.throttled += 1
        state.throttle_ms_total += retry_ms
        return Refuse(Throttle(retry_ms, mute_ms), no_room=no_room)

    @staticmethod
    def waits(hold: Hold, pids: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
        """The ``(PID, until)`` pairs a request decided as ``hold`` waits for."""
        return hold.waits or tuple((pid, hold.until_ms) for pid in pids[:1])

    def admitted(self, state: ProducerIdUser, hold: Hold, pids: tuple[int, ...], now_ms: int, tap: NoTap) -> None:
        """A Produce held (``hold``, for ``pids``) is forwarded now: its PIDs reached the broker, so they are known
        from now on, here and at the peers (a hold already ended or released is left as it is)."""
        if not state.holding:
            return
        for pid, until in self.waits(hold, pids):
            held = state.holding.get(pid)
            if held is not None and held[0] == until:
                del state.holding[pid]
                self._known(state, pid, now_ms, tap)

    def abandon_all(self, state: ProducerIdUser, hold: Hold, pids: tuple[int, ...], now_ms: int, tap: NoTap) -> None:
        """Every request waiting for a PID of ``hold`` dropped with its connection: once no request waits for a PID
        any more, its hold is released as if never made (not known, its token back, here and at the peers)."""
        for pid, until in self.waits(hold, pids):
            self._release(state, pid, until, now_ms, tap)

    def _release(self, state: ProducerIdUser, pid: int, until_ms: int, now_ms: int, tap: NoTap) -> None:
        if not state.holding:
            return
        held = state.holding.get(pid)
        if held is None or held[0] != until_ms:
            return
        held[1] -= 1
        if held[1] > 0:
            return
        del state.holding[pid]
        state.bucket.give_back(1, now_ms)
        state.abandoned += 1
        tap.producer_id_released(state.user, pid)  # shared usage: the peers' buckets get it back too

    def settled_elsewhere(self, state: ProducerIdUser, pid: int, now_ms: int, tap: NoTap) -> None:
        """A peer admitted ``pid`` while it is held here too: one id, paid for once, there. This hold's token goes
        back (here and, through the tap, at the peers) and the PID leaves ``holding``, so neither its requests'
        end nor their abandon counts it again; they still wait for their time."""
        if state.holding and state.holding.pop(pid, None) is not None:
            state.bucket.give_back(1, now_ms)
            tap.producer_id_released(state.user, pid)

    def release_past(self, state: ProducerIdUser, now_ms: int, tap: NoTap) -> None:
        """Forget the holds whose time has come, each PID written into the cache again as it goes: it reached the
        broker then, so it stays known a window from there (a hold of more than half a window could outlast the
        filter the PID was written into when it was held, and the PID be counted a second time)."""
        holding = state.holding
        while holding:
            pid, (until, _) = next(iter(holding.items()))
            if until > now_ms:
                break
            del holding[pid]
            self._known(state, pid, now_ms, tap)

    @staticmethod
    def _known(state: ProducerIdUser, pid: int, now_ms: int, tap: NoTap) -> None:
        """A held ``pid`` admitted: into the cache, and told to the peers as known (its token they have)."""
        if not state.seen(pid, now_ms):
            state.add(pid, now_ms)
        tap.producer_id_admitted(state.user, pid)
