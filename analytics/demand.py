"""What a throttle hid, and what a quota table would do: the demand estimate and the replay's client. Pure Python.

**The demand a throttle hid.** A tenant over its quota is held (its connections muted) part of the time: what it
would have sent is censored, and its rates are what the quota let through. Per interval the usage log has the bytes
admitted ``B`` in ``n`` requests, the interval ``T``, the time the tenant was held ``H`` (the union of its held
spans, ``held_ms``) and ``m``, how many of the requests were throttled by a byte-rate quota (``throttles``). A
request that was not throttled is followed by the tenant's own pace; a throttled one by a hold, after which the
tenant sends again as soon as it may. So the time it was free, ``T - H``, is spent at its own pace sending the
``n - m`` requests that were not throttled, and its demand in that interval is::

    d = B x (n - m) / n / (T - H)

(Kafka's throttle ``X = (O - Q) / Q x W`` is the hold that brings the rate over the window back to the quota ``Q``;
the bytes a throttled request carries were sent at the end of a hold, on the quota's clock, not the tenant's). A
hold shorter than the tenant's own gap between requests is counted in ``H`` though it cost the tenant nothing, so
``d`` errs low, never high. An interval the tenant was held through (free less than :data:`MIN_FREE` of it, or
every request throttled) says only that its demand was above the quota. The tenant's estimated demand is ``d``
pooled (free bytes over free time, so a few noisy intervals do not make it) over the intervals that tell it and in
which it was above its quota (after a peak, a tenant is still held while the window forgets the peak, at its quiet
pace); none when none tells ("not measurable": the planner says so rather than recommend its catch-up bursts). On
the synthetic tenants of :mod:`analytics.generate` (request sizes varying, lognormal sigma 0.5) it is 0.94-0.98 of
the true demand over six seeds. The rate ``O`` each throttle was decided on (``observed_rate_sum`` /
``throttles``) is reported beside it: once a tenant is held, ``O`` stays just over ``Q`` (each hold lets one more
request through), so it is a floor of the demand, not the demand.

**The replay's client** (:func:`replay`): a closed-loop sender at a given demand per interval, one send every
``step_s`` (of ``demand x step_s`` bytes), through the proxy's own :class:`quota.managers.client_quota.ClientQuotaManager`
on a manual clock: a throttle holds it for the mute (capped at the window, as the proxy caps it), the sends it
misses while held are lost, not resent. The same client writes the synthetic throttled tenants of
:mod:`analytics.generate`, whose demand is then known.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from quota.managers.client_quota import ClientQuotaManager
from quota.primitives.clock import ManualClock
from quota.primitives.decision import Throttle
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow

MIN_FREE = 0.1  # an interval its tenant was free for less of says only "above the quota"


def interval_demand(interval_s: float, nbytes: float, requests: int, throttles: int, held_ms: float) -> float | None:
    """``d`` for one interval in which the tenant was held (see the module docstring); None when it does not tell
    (not held, held through it, or every request throttled)."""
    held = min(held_ms, interval_s * 1000) / 1000
    free = interval_s - held
    if held <= 0 or free < interval_s * MIN_FREE or requests <= throttles:
        return None
    return nbytes * (requests - throttles) / requests / free


def demand_rate(intervals: Iterable[tuple[float, float, int, int, float]], quota: float | None) -> float | None:
    """The tenant's estimated demand from ``(interval_s, bytes, requests, throttles, held_ms)`` per interval and the
    quota it was held to: ``d`` pooled (free bytes over free time) over the intervals that tell it and in which it
    was above the quota; over all that tell when none was; None when none tells."""
    above = [0.0, 0.0]
    told = [0.0, 0.0]
    for interval_s, nbytes, requests, throttles, held_ms in intervals:
        d = interval_demand(interval_s, nbytes, requests, throttles, held_ms)
        if d is None:
            continue
        free = interval_s - min(held_ms, interval_s * 1000) / 1000
        for pool in (told, above) if quota is not None and d > quota else (told,):
            pool[0] += d * free
            pool[1] += free
    sent, free = above if above[1] else told
    return sent / free if free else None


@dataclass
class Outcome:
    """One interval of a replay: what was sent, how long the tenant was held, and how many throttles."""

    sent: float = 0.0
    requests: int = 0
    held_ms: float = 0.0
    throttles: int = 0
    observed_rate_sum: float = 0.0


def replay(
    demand: Sequence[tuple[float, float, float]],
    quota: float | None,
    window: QuotaWindow = QuotaWindow(),
    step_s: float = 1.0,
    max_throttle_ms: int | None = None,
    rng: random.Random | None = None,
    sigma: float = 0.5,
) -> list[Outcome]:
    """A closed-loop tenant through the proxy's byte-rate quota: ``demand`` is ``(end_s, interval_s, rate)`` per
    interval in time order (bytes/s it would send); ``quota`` bytes/s (None: unlimited). Returns per interval what it
    sent, how long it was held (a hold past an interval's end counts in the next, as the usage log counts it) and
    the throttles, with the rate each was decided on. With ``rng``, request sizes vary (lognormal, ``sigma``, the
    same mean) as a real client's batches do."""
    scale = math.exp(-sigma * sigma / 2)  # E[lognormvariate(0, sigma)] = exp(sigma^2 / 2)
    out = [Outcome() for _ in demand]
    if not demand:
        return out
    if quota is None or math.isinf(quota) or never_throttled(demand, quota, window, step_s, rng is not None):
        for o, (_, interval_s, rate) in zip(out, demand):
            o.sent = rate * interval_s
            o.requests = max(1, round(interval_s / step_s)) if rate > 0 else 0
        return out
    clock = ManualClock(0)
    table = QuotaTable.from_values([({"client-id": "tenant"}, {"producer_byte_rate": quota})])
    manager = ClientQuotaManager(table, "producer_byte_rate", clock, window, max_throttle_ms)
    step_ms = max(1, round(step_s * 1000))
    held_until = 0  # ms
    i = 0
    ends = [round(end * 1000) for end, _, _ in demand]
    starts = [round((end - interval_s) * 1000) for end, interval_s, _ in demand]
    t = starts[0]
    while i < len(demand):
        if t >= ends[i]:
            i += 1
            if i < len(demand):
                t = max(t, starts[i])
            continue
        if t < starts[i]:
            t = starts[i]
        nbytes = demand[i][2] * step_ms / 1000
        if rng is not None:
            nbytes *= rng.lognormvariate(0, sigma) * scale
        if nbytes > 0:
            decision = manager.record_and_decide("", "tenant", nbytes, t)
            out[i].sent += nbytes
            out[i].requests += 1
            if isinstance(decision, Throttle) and decision.mute_ms:
                out[i].throttles += 1
                out[i].observed_rate_sum += decision.observed_rate
                _hold(out, ends, i, max(t, held_until), t + decision.mute_ms)
                held_until = max(held_until, t + decision.mute_ms)
        t = max(t + step_ms, held_until)
    return out


def never_throttled(
    demand: Sequence[tuple[float, float, float]], quota: float, window: QuotaWindow, step_s: float, varied: bool
) -> bool:
    """True when no replay of ``demand`` can be throttled, so it need not be run: the sampled rate is at most what
    the sends within ``window.num + 1`` samples carry (at the highest rate) over ``window.num - 1`` samples."""
    if varied or not demand:
        return False
    size_s = window.size_seconds
    sends = math.floor((window.num + 1) * size_s / step_s) + 1
    return max(rate for _, _, rate in demand) * step_s * sends / ((window.num - 1) * size_s) <= quota


def _hold(out: list[Outcome], ends: list[int], i: int, start: int, end: int) -> None:
    """Add the held span ``[start, end)`` ms to interval ``i`` and the ones after it, each its own part."""
    while start < end and i < len(out):
        part_end = min(end, ends[i])
        if part_end > start:
            out[i].held_ms += part_end - start
        start, i = max(start, ends[i]), i + 1


def summary(outcomes: Iterable[Outcome]) -> dict:
    """A replay's figures: intervals in which the tenant was held, throttles, held seconds."""
    held_intervals = throttles = 0
    held_ms = 0.0
    for o in outcomes:
        held_intervals += o.held_ms > 0
        throttles += o.throttles
        held_ms += o.held_ms
    return {"held_intervals": held_intervals, "throttles": throttles, "held_s": round(held_ms / 1000, 1)}
