"""KIP-936's cleanup of the producer-id quota's users (``producer.id.quota.cache.cleanup.scheduler.interval.ms``),
a batch at a time. Pure: ``now_ms`` is passed in.

A user's expired filters are disposed of; a user with no live filter and no id held is dropped once its bucket is
one a fresh user would get (full again, or of rate 0: never refilled, and a fresh bucket throttles every new id the
same). The bucket outlives the filters, or a user exhausted and then idle for one window would come back to a full
burst (``rate x num`` new ids at once), not what refilled. Memory stays bounded: a bucket refills within ``num``
windows.
"""

from __future__ import annotations

from quota.managers.producer_id_holds import HoldEnforcement
from quota.managers.producer_id_user import ProducerIdUser
from quota.primitives.sensor_table import COMPACT_BELOW
from quota.primitives.token_bucket import TokenBucket
from quota.primitives.usage_tap import NoTap


class UserSweep:
    """Where a cleanup with a limit goes on from, and the most users held since the table was last compacted."""

    __slots__ = ("_pending", "_high")

    def __init__(self) -> None:
        self._pending: list[str] = []  # the users a cleanup with a limit has still to look at in this pass
        self._high = 0  # the most users held since the dict was last compacted

    def run(
        self,
        users: dict[str, ProducerIdUser],
        now_ms: int,
        limit: int | None,
        holds: HoldEnforcement,
        tap: NoTap,
    ) -> tuple[int, dict[str, ProducerIdUser]]:
        """Look at ``limit`` users at most (None: all), going on where the last call stopped (a sweep over every
        user is split over calls, so the caller's thread is never held for a whole pass: 10^5 users take ~0.1 s);
        holds past their time end first (``holds``, told to ``tap``). Returns how many were dropped, and the users'
        table: ``users``, or a compact copy of it once it holds a sixteenth of the most it held (a dict keeps the
        room of deleted entries)."""
        if limit is None or not self._pending:
            self._pending = list(users)  # the next pass: one C-level copy of the keys
        pending = self._pending
        batch = pending[-limit:] if limit is not None else pending
        if limit is not None:
            del pending[-limit:]
        else:
            self._pending = []
        dropped = 0
        for user in batch:
            state = users.get(user)
            if state is None:
                continue
            if state.holding:
                holds.release_past(state, now_ms, tap)
            state.dispose_expired(now_ms)
            if not state.live and not state.holding and _replaceable(state.bucket, now_ms):
                del users[user]
                dropped += 1
        self._high = max(self._high, len(users) + dropped)
        if dropped and len(users) <= self._high // COMPACT_BELOW:
            users = dict(users)
            self._high = len(users)
        return dropped, users


def _replaceable(bucket: TokenBucket, now_ms: int) -> bool:
    """True when a new bucket would decide as this one does: it is full again, or it never refills."""
    return bucket.rate <= 0 or bucket.peek(now_ms) >= bucket.burst
