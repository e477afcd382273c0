"""Kafka's sampled-window rate (``Rate`` over a ``WindowedSum``/``SampledStat``), in plain Python.

Facts carried over from apache/kafka ``clients/.../metrics/stats/Rate.java`` and ``SampledStat.java``:

* A rate keeps ``quota.window.num`` samples (default 11) of ``quota.window.size.seconds`` (default 1) each,
  plus one extra "overlapping" slot, recycled round-robin (``maxSamples = samples + 1``).
* ``record(value, now)`` adds to the current sample, first starting a new one when the current sample is
  complete (``now - sample.start >= window size``).
* Before measuring, samples with no event for ``samples * window size`` ms are obsolete and are reset
  (``now - sample.lastEvent >= expireAge``). Samples that started before the monitored window but have an event
  inside it are kept, so the elapsed time can exceed ``samples * window size``.
* The measured rate is ``sum(samples) / elapsed`` where ``elapsed = now - oldest sample start``, but never less
  than ``samples - 1`` full windows (the missing windows are assumed to have been empty), and never below 1 ms.

Start-up behaviour, which users notice: a fresh (or long idle) sensor divides by at least ``(samples - 1)`` full
windows, 10 s with the defaults, even if the first bytes arrive at its very first millisecond. So a new client may
burst about ``quota * (samples - 1) * window size`` bytes at once before it is throttled: 10 s worth of its quota.
Kafka's ``getMaxValueInQuotaWindow`` is exactly this amount.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_QUOTA_WINDOW_NUM = 11
"""Kafka ``quota.window.num`` default (``QuotaConfig.NUM_QUOTA_SAMPLES_DEFAULT``)."""

DEFAULT_QUOTA_WINDOW_SIZE_SECONDS = 1
"""Kafka ``quota.window.size.seconds`` default (``QuotaConfig.QUOTA_WINDOW_SIZE_SECONDS_DEFAULT``)."""


@dataclass(frozen=True, slots=True)
class QuotaWindow:
    """The sampling of a quota rate: ``num`` samples of ``size_seconds`` each (Kafka's ``MetricConfig``).

    The same shape serves ``quota.window.*`` (produce/fetch), ``controller.quota.window.*`` (KIP-599) and
    ``producer.id.quota.window.*`` (KIP-936). Kafka requires both values to be at least 1.
    """

    num: int = DEFAULT_QUOTA_WINDOW_NUM
    size_seconds: int = DEFAULT_QUOTA_WINDOW_SIZE_SECONDS

    def __post_init__(self) -> None:
        for name in ("num", "size_seconds"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"QuotaWindow.{name} must be an integer >= 1, got {value!r}")

    @property
    def size_ms(self) -> int:
        """One sample's span in milliseconds (``MetricConfig.timeWindowMs``)."""
        return self.size_seconds * 1000

    @property
    def span_ms(self) -> int:
        """``num * size``: the monitored window, and the age at which an idle sample becomes obsolete."""
        return self.num * self.size_ms

    @property
    def min_elapsed_ms(self) -> int:
        """``(num - 1) * size``: the least elapsed time a rate is ever divided by."""
        return (self.num - 1) * self.size_ms


class _Sample:
    """One window's running total (``SampledStat.Sample``)."""

    __slots__ = ("start_ms", "last_event_ms", "value", "event_count")

    def __init__(self, now_ms: int) -> None:
        self.reset(now_ms)

    def reset(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.last_event_ms = now_ms
        self.value = 0.0
        self.event_count = 0

    def __repr__(self) -> str:
        return f"_Sample(start_ms={self.start_ms}, last_event_ms={self.last_event_ms}, value={self.value})"


class Rate:
    """A windowed sum divided by the elapsed time, exactly as Kafka's ``Rate`` measures it.

    Values are recorded and measured at caller-supplied ``now_ms``; time must not go backwards. ``measure`` is in
    units per second (bytes/s for byte-rate quotas). See the module docstring for the start-up burst rule.
    """

    __slots__ = ("window", "_samples", "_current")

    def __init__(self, window: QuotaWindow = QuotaWindow()) -> None:
        self.window = window
        self._samples: list[_Sample] = []
        self._current = 0

    # -- recording -------------------------------------------------------------------------------------------

    def record(self, value: float, now_ms: int) -> None:
        """Add ``value`` at ``now_ms`` (``SampledStat.record``). A negative value "unrecords"."""
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window.size_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.event_count += 1
        sample.last_event_ms = now_ms

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        # One slot more than `num`: the oldest sample may still overlap the monitored window.
        self._current = (self._current + 1) % (self.window.num + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    # -- measuring -------------------------------------------------------------------------------------------

    def _purge_obsolete_samples(self, now_ms: int) -> None:
        expire_age = self.window.span_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)

    def total(self, now_ms: int) -> float:
        """The windowed sum at ``now_ms`` after purging obsolete samples (``WindowedSum.measure``)."""
        self._purge_obsolete_samples(now_ms)
        return sum(sample.value for sample in self._samples)

    def window_size_ms(self, now_ms: int) -> int:
        """The elapsed time the sum is divided by (``Rate.windowSize``); at least ``(num - 1)`` windows, >= 1 ms."""
        self._purge_obsolete_samples(now_ms)
        if not self._samples:
            self._samples.append(_Sample(now_ms))  # as SampledStat.oldest() does
        oldest_start_ms = min(sample.start_ms for sample in self._samples)
        elapsed_ms = now_ms - oldest_start_ms
        size_ms = self.window.size_ms
        full_windows = elapsed_ms // size_ms
        min_full_windows = self.window.num - 1
        if full_windows < min_full_windows:
            elapsed_ms += (min_full_windows - full_windows) * size_ms
        return max(elapsed_ms, 1)

    def measure(self, now_ms: int) -> float:
        """The rate per second at ``now_ms`` (``Rate.measure`` with ``TimeUnit.SECONDS``)."""
        total = self.total(now_ms)
        return total / (self.window_size_ms(now_ms) / 1000.0)

    def peek(self, now_ms: int) -> float:
        """What :meth:`measure` would return at ``now_ms``, changing nothing: obsolete samples count as the reset
        ones measure would make of them (empty, starting now). For metrics: a scrape never changes what a later
        quota check measures, and may read a rate from another thread while its owner records (each sample's
        fields are read once; a sample reset meanwhile counts in either state)."""
        expire_age = self.window.span_ms
        total = 0.0
        oldest_start_ms = now_ms
        for sample in tuple(self._samples):
            last_event_ms, start_ms, value = sample.last_event_ms, sample.start_ms, sample.value
            if now_ms - last_event_ms < expire_age:
                total += value
                oldest_start_ms = min(oldest_start_ms, start_ms)
        elapsed_ms = now_ms - oldest_start_ms
        size_ms = self.window.size_ms
        full_windows = elapsed_ms // size_ms
        min_full_windows = self.window.num - 1
        if full_windows < min_full_windows:
            elapsed_ms += (min_full_windows - full_windows) * size_ms
        return total / (max(elapsed_ms, 1) / 1000.0)

    def __repr__(self) -> str:
        return f"Rate(window={self.window!r}, samples={self._samples!r})"
