"""What a throttle hid, and what a quota table would do: the demand estimate and the replay's client. Pure Python.

**The demand a throttle hid.** A tenant over its quota is held (its connections muted) part of the time: what it
would have sent is censored, and its rates are what the quota let through. Per interval the usage log has the bytes
admitted ``B`` in ``n`` requests, the interval ``T``, the time the tenant was held ``H`` (the union of its held
spans, ``held_ms``) and ``m``, how many of the requests a throttle held (``held_by``, summed over the quotas that
held them: a byte rate, a topic quota, a request rate; in a log written before ``held_by``, ``throttles``). A
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

**The replay's client** (:func:`replay`): a producer whose application hands it a given demand per interval, every
``step_s``, through the proxy's own :class:`quota.managers.client_quota.ClientQuotaManager` on a manual clock: a
throttle holds it for the mute (capped at the window, as the proxy caps it). It queues what it is handed while held
and sends it when the hold ends, request after request, as librdkafka and the Java client do (``bench/planner_apply.py``
measured it: a librdkafka producer 2 x over its quota has a queue from its first hold on and is held 99 % of each
second); its queue is bounded (:data:`CLIENT_BUFFER_BYTES`), past it what it is handed is refused. A client that
queues nothing (``buffer_bytes=0``) loses what it is handed while held: it writes the synthetic throttled tenants
of :mod:`analytics.generate`, whose demand the estimate above then reads exactly.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from quota.managers.client_quota import ClientQuotaManager
from quota.primitives.clock import ManualClock
from quota.primitives.decision import Throttle
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow

MIN_FREE = 0.1  # an interval its tenant was free for less of says only "above the quota"


def interval_demand(
    interval_s: float, nbytes: float, requests: int, held_requests: int, held_ms: float
) -> float | None:
    """``d`` for one interval in which the tenant was held (see the module docstring); None when it does not tell
    (not held, held through it, or every request held). ``nbytes`` may count requests instead: ``d`` is then the
    tenant's pace in requests/s (a request rate's demand)."""
    held = min(held_ms, interval_s * 1000) / 1000
    if held <= 0 or held_through(interval_s, held_ms) or requests <= held_requests:
        return None
    return nbytes * (requests - held_requests) / requests / (interval_s - held)


def held_through(interval_s: float, held_ms: float) -> bool:
    """Held for all but less than :data:`MIN_FREE` of the interval."""
    return interval_s - min(held_ms, interval_s * 1000) / 1000 < interval_s * MIN_FREE


def demand_rate(intervals: Iterable[tuple[float, float, int, int, float]], quota: float | None) -> float | None:
    """The tenant's estimated demand from ``(interval_s, bytes, requests, held requests, held_ms)`` per interval, in time
    order (one per interval of the log), and the quota it was held to: ``d`` pooled (free bytes over free time) over
    the intervals that tell it and in which it was above the quota; over all that tell when none was; None when none
    tells. An interval right after one its tenant was held through does not tell: its client comes out of the hold
    with what it queued meanwhile and sends it as fast as it can, which is not its demand."""
    above = [0.0, 0.0]
    told = [0.0, 0.0]
    after_hold = False
    for interval_s, nbytes, requests, held_requests, held_ms in intervals:
        d = None if after_hold else interval_demand(interval_s, nbytes, requests, held_requests, held_ms)
        after_hold = held_through(interval_s, held_ms)
        if d is None:
            continue
        free = interval_s - min(held_ms, interval_s * 1000) / 1000
        for pool in (told, above) if quota is not None and d > quota else (told,):
            pool[0] += d * free
            pool[1] += free
    sent, free = above if above[1] else told
    return sent / free if free else None


Interval = tuple[float, float, float, int, int, float]  # (time, interval_s, bytes, requests, held requests, held_ms)


def summed_demand_rate(members: Iterable[Sequence[Interval]], quota: float | None) -> float | None:
    """The estimated demand of what several members share (a quota group, a topic) from each member's intervals in
    time order (one per interval it appears in) and the shared quota: in each interval in which a member was held,
    each member's ``d`` where it was held and its rate where it was not, added up; the interval tells only when
    every member's part does (none held through it, none just out of a hold it was held through); pooled over the
    free time (the interval less its most held member's held time) as :func:`demand_rate` pools; None when no
    interval tells. One member: :func:`demand_rate`."""
    per_time: dict[float, list] = {}  # time -> [interval_s, summed demand, some member held, tells, most held ms]
    for series in members:
        after_hold = False
        for time, interval_s, nbytes, requests, held_requests, held_ms in series:
            held = held_ms > 0
            d = None if after_hold else interval_demand(interval_s, nbytes, requests, held_requests, held_ms)
            tells = d is not None if held else not after_hold
            after_hold = held_through(interval_s, held_ms)
            slot = per_time.setdefault(time, [interval_s, 0.0, False, True, 0.0])
            slot[1] += (d or 0.0) if held else nbytes / interval_s
            slot[2], slot[3] = slot[2] or held, slot[3] and tells
            slot[4] = max(slot[4], min(held_ms, interval_s * 1000))
    above, told = [0.0, 0.0], [0.0, 0.0]
    for interval_s, d, held, tells, held_ms in per_time.values():
        if not (held and tells):
            continue
        free = interval_s - held_ms / 1000
        for pool in (told, above) if quota is not None and d > quota else (told,):
            pool[0] += d * free
            pool[1] += free
    sent, free = above if above[1] else told
    return sent / free if free else None


CLIENT_BUFFER_BYTES = 32 * 1024 * 1024
"""What the replay's client holds unsent, at most: the Java producer's ``buffer.memory`` default (32 MiB).
librdkafka's queue is bounded by ``queue.buffering.max.messages`` (100,000) and ``queue.buffering.max.kbytes`` (1 GiB):
100 MB of 1 kB messages. Past the bound the application's sends are refused (librdkafka's ``QUEUE_FULL``, the Java
client's ``send`` blocking ``max.block.ms`` and then failing): they are lost, counted in ``refused``."""
MAX_REQUEST_BYTES = 1_000_000
"""The most one request of the replay's client carries: librdkafka's ``message.max.bytes`` default (the Java
client's ``max.request.size`` is 1 MiB)."""
ROUND_TRIP_MS = 3
"""How long a client with a queue is free between one request and the next: the request read and answered (the
hold starts at the answer, KIP-219). Measured in bench/planner_apply.py: a librdkafka producer 1.4 x over its quota
sends 4.5 kB requests, each throttled about 11 ms, and is held about 80 % of each second."""


@dataclass
class Outcome:
    """One interval of a replay: what was sent, how long the tenant was held, how many throttles, and what its
    client refused because its buffer was full."""

    sent: float = 0.0
    requests: int = 0
    held_ms: float = 0.0
    throttles: int = 0
    observed_rate_sum: float = 0.0
    refused: float = 0.0


@dataclass(frozen=True)
class Client:
    """The replay's producer: ``step_s`` how often the application hands it data (each time ``demand x step_s``
    bytes), ``buffer_bytes`` what it holds unsent at most (0: it queues nothing, so what it is handed while held is
    lost, as with an application that drops what its producer cannot take at once), ``request_bytes`` what one
    request carries at most, ``gap_ms`` the time from one request to the next while it has more queued."""

    step_s: float = 1.0
    buffer_bytes: float = CLIENT_BUFFER_BYTES
    request_bytes: float = MAX_REQUEST_BYTES
    gap_ms: int = ROUND_TRIP_MS


def replay(
    demand: Sequence[tuple[float, float, float]],
    quota: float | None,
    window: QuotaWindow = QuotaWindow(),
    step_s: float = 1.0,
    max_throttle_ms: int | None = None,
    rng: random.Random | None = None,
    sigma: float = 0.5,
    client: Client | None = None,
) -> list[Outcome]:
    """A producer through the proxy's byte-rate quota: ``demand`` is ``(end_s, interval_s, rate)`` per interval in
    time order (bytes/s the application hands it); ``quota`` bytes/s (None: unlimited). The client queues what it is
    handed and sends what it holds whenever it is not held (one request at most ``request_bytes``, the next at once
    while more is queued), so what a hold kept back goes out when the hold ends, as librdkafka and the Java client
    send it; past ``buffer_bytes`` queued, what it is handed is refused. Returns per interval what it sent, how long
    it was held (the union of the held spans; a hold past an interval's end counts in the next, as the usage log
    counts it), the throttles with the rate each was decided on, and what was refused. With ``rng``, the sizes
    handed to it vary (lognormal, ``sigma``, the same mean) as a real application's do. ``client`` overrides
    ``step_s``."""
    client = client or Client(step_s=step_s)
    out = [Outcome() for _ in demand]
    if not demand:
        return out
    if quota is None or math.isinf(quota) or never_throttled(demand, quota, window, client.step_s, rng is not None):
        for o, (_, interval_s, rate) in zip(out, demand):
            o.sent = rate * interval_s
            o.requests = max(1, round(interval_s / client.step_s)) if rate > 0 else 0
        return out
    manager = ClientQuotaManager(
        QuotaTable.from_values([({"client-id": "tenant"}, {"producer_byte_rate": quota})]),
        "producer_byte_rate",
        ManualClock(0),
        window,
        max_throttle_ms,
    )
    handed = _Handed(demand, client, rng, sigma)
    queued = 0.0
    held_until = 0  # ms
    k = 0  # the interval a send at t counts in
    t = handed.starts[0]
    while True:
        for i, nbytes in handed.until(t):
            taken = min(nbytes, max(0.0, client.buffer_bytes - queued)) if client.buffer_bytes else nbytes
            queued += taken
            out[i].refused += nbytes - taken
        while k < len(out) - 1 and t >= handed.ends[k]:
            k += 1
        if t >= handed.ends[-1]:
            return out
        if queued > 0 and t >= held_until:
            nbytes = min(queued, client.request_bytes)
            queued -= nbytes
            decision = manager.record_and_decide("", "tenant", nbytes, t)
            out[k].sent += nbytes
            out[k].requests += 1
            if isinstance(decision, Throttle) and decision.mute_ms:
                out[k].throttles += 1
                out[k].observed_rate_sum += decision.observed_rate
                _hold(out, handed.ends, k, max(t, held_until), t + decision.mute_ms)
                held_until = max(held_until, t + decision.mute_ms)
                if not client.buffer_bytes:  # queues nothing: what it is handed while held is lost
                    lost = list(handed.until(held_until - 1))
                    for i, nbytes in lost:
                        out[i].refused += nbytes
                    if lost:
                        handed.resume(held_until)
            if queued > 0 and t + client.gap_ms >= held_until:
                t += client.gap_ms
                continue  # more queued and free: the next request goes now
        if queued > 0:
            t = max(held_until, t + client.gap_ms)
        elif handed.done:
            return out
        else:
            t = max(handed.next_ms, held_until)


class _Handed:
    """What the application hands the replay's client: every ``step_s`` within each interval, ``rate x step_s``
    bytes (varied with ``rng``), read in time order."""

    def __init__(self, demand: Sequence[tuple[float, float, float]], client: Client, rng, sigma: float) -> None:
        self.rates = [rate for _, _, rate in demand]
        self.ends = [round(end * 1000) for end, _, _ in demand]
        self.starts = [round((end - interval_s) * 1000) for end, interval_s, _ in demand]
        self.step_ms = max(1, round(client.step_s * 1000))
        self.rng, self.sigma = rng, sigma
        self.scale = math.exp(-sigma * sigma / 2)  # E[lognormvariate(0, sigma)] = exp(sigma^2 / 2)
        self.i = 0
        self.next_ms = self.starts[0]

    def resume(self, t: int) -> None:
        """The next handing at ``t`` (a client that queues nothing is handed data again when its hold ends)."""
        if not self.done and self.next_ms > t:
            self.next_ms = max(t, self.starts[self.i])

    @property
    def done(self) -> bool:
        return self.i >= len(self.rates)

    def until(self, t: int) -> Iterator[tuple[int, float]]:
        """(interval, bytes) of each handing at or before ``t`` not yet read."""
        while self.i < len(self.rates) and self.next_ms <= t:
            if self.next_ms >= self.ends[self.i]:
                self.i += 1
                if self.i < len(self.rates):
                    self.next_ms = max(self.next_ms, self.starts[self.i])
                continue
            nbytes = self.rates[self.i] * self.step_ms / 1000
            if self.rng is not None:
                nbytes *= self.rng.lognormvariate(0, self.sigma) * self.scale
            self.next_ms += self.step_ms
            if nbytes > 0:
                yield self.i, nbytes
        while self.i < len(self.rates) and self.next_ms >= self.ends[self.i]:  # past the last handing of an interval
            self.i += 1
            if self.i < len(self.rates):
                self.next_ms = max(self.next_ms, self.starts[self.i])


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
