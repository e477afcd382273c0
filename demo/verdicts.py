"""How the demo judges each client.

Every second each client gets a line ending in a verdict computed from its own counts (bytes acknowledged to the
producer, bytes the consumer received), over a sliding window of MEASURED_SPANS quota window spans that starts
after the start-up burst (the first span, during which a fresh quota admits about quota x (samples - 1) windows,
as in Kafka):

- a limited client must run within LIMITED_BOUNDS x its quota. With 1 MB requests (librdkafka's default batch)
  against a 1 MiB/s quota, a throttled client bursts each time its oldest samples expire, about once per window
  span, as against Kafka; a window of several spans averages over several of those cycles (over one span, runs
  here measured 0.25-1.26 x; over six, 0.84-1.10 x with 3 and with 11 x 1 s windows).
- the unlimited producer is paced at UNLIMITED_OFFER, four times the limited quota, and must get at least
  OFFERED_SHARE x what it offers: a paced client cannot go faster than it offers, so getting it all means it was
  not slowed, and a quota applied to it by mistake would show as 0.25 x. Unpaced, it would take the two cores a
  laptop or CI runner shares between the broker, the proxy and the clients, and slow every client for reasons
  that have nothing to do with quotas.
- the unlimited consumer reads the same topic and must keep up with it: read at least WRITTEN_SHARE x what both
  producers wrote in the same window (less than the producer's 0.95 because a burst written just before the
  window ends may still be on its way to the consumer; a 1 MiB/s quota applied by mistake would show as 0.2 x).

For the limited clients the proxy's own count over the same window (``kafka_quota_proxy_quota_bytes_total``, as
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from config.model import ProxyConfig

LIMITED, UNLIMITED = "demo-limited", "demo-unlimited"
MiB = 2**20
UNLIMITED_OFFER = 4 * MiB
LIMITED_BOUNDS = (0.8, 1.2)
OFFERED_SHARE = 0.95
WRITTEN_SHARE = 0.9
MEASURED_SPANS = 6


@dataclass(frozen=True)
class Verdict:
    """One client's verdict over the whole run: every judged report, the window's rate / its reference."""

    client: str
    expected: str  # e.g. "0.80-1.20 x quota 1.00 MiB/s"
    ratios: tuple[float, ...]
    failed: int  # judged reports outside the bounds

    @property
    def ok(self) -> bool | None:
        """None: the run ended before the first judged report."""
        return None if not self.ratios else self.failed == 0

    def text(self) -> str:
        if not self.ratios:
            return f"{self.client:24s} not judged: the run ended before its first verdict  NONE"
        return (
            f"{self.client:24s} {min(self.ratios):.2f}-{max(self.ratios):.2f} x in {len(self.ratios)} judged "
            f"reports, {self.failed} outside (ok {self.expected})  {'OK' if self.ok else 'FAIL'}"
        )


def timing(config: ProxyConfig) -> tuple[int, int]:
    """(start-up burst, measured window), whole seconds: one quota window span, MEASURED_SPANS spans."""
    span = config.settings.quota_window_num * config.settings.quota_window_size_seconds
    return math.ceil(span), math.ceil(MEASURED_SPANS * span)


def bounds(name: str) -> tuple[float, float]:
    """The (lowest, highest) window rate / reference ratio that passes for this client."""
    if name.startswith(LIMITED):
        return LIMITED_BOUNDS
    return (OFFERED_SHARE if name.endswith("producer") else WRITTEN_SHARE), math.inf


def bounds_text(name: str) -> str:
    low, high = bounds(name)
    return f"{low:.2f}-{high:.2f}" if high < math.inf else f">= {low:.2f}"


def expected(name: str, quota) -> str:
    if name.startswith(LIMITED):
        return f"{bounds_text(name)} x quota {quota[name.split()[1]].limit / MiB:.2f} MiB/s"
    if name.endswith("producer"):
        return f"{bounds_text(name)} x offered {UNLIMITED_OFFER / MiB:.2f} MiB/s"
    return f"{bounds_text(name)} x written by both producers"


def passes(name: str, ratio: float) -> bool:
    low, high = bounds(name)
    return low <= ratio <= high


def judge(name: str, samples, burst_s: int, window_s: int, quota) -> tuple[str, float | None]:
    """One client's report line at the newest sample, and its ratio (None while not judged yet).

    The window runs from the end of the start-up burst, then slides once it is ``window_s`` long; the verdict
    comes from the clients' counts; for a limited client the proxy's count over the same window is shown too.
    """
    k = len(samples) - 1
    (last_t, last, _), (now_t, now, proxy_now) = samples[k - 1], samples[k]
    head = f"{k:4d} s  {name:23s} {(now[name] - last[name]) / (now_t - last_t) / MiB:5.2f} MiB/s |"
    if k <= burst_s:
        return f"{head} start-up burst, not measured before {burst_s} s  WAIT", None
    first = max(burst_s, k - window_s)
    start_t, start, proxy_start = samples[first]
    rate = (now[name] - start[name]) / (now_t - start_t)
    if name.startswith(LIMITED):
        reference = quota[name.split()[1]].limit
        counted = (proxy_now[name] - proxy_start[name]) / (now_t - start_t) / reference
        what = f"quota (proxy counted {counted:4.2f} x)"
    elif name.endswith("producer"):
        reference, what = UNLIMITED_OFFER, "offered"
    else:
        reference = sum(now[n] - start[n] for n in now if n.endswith("producer")) / (now_t - start_t)
        what = f"written ({reference / MiB:.2f})"
    ratio = rate / reference if reference else 0.0
    judged = k - first >= window_s
    verdict = ("OK" if passes(name, ratio) else "FAIL") if judged else f"WAIT until {burst_s + window_s} s"
    return (
        f"{head} over {first}-{k} s {rate / MiB:5.2f} MiB/s = {ratio:4.2f} x {what}, ok {bounds_text(name)}  {verdict}",
        ratio if judged else None,
    )
