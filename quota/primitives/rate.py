"""Kafka's sampled-window rate (``Rate`` over a ``WindowedSum``/``SampledStat``), in plain Python: :class:`PureRate`,
the reference. :data:`Rate`, what the quota managers use, is it or its C twin (quota/primitives/native/rate.c, built
where a compiler is; ``KAFKA_QUOTA_PROXY_PURE_PYTHON=1`` keeps the pure class), chosen once at import.

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

from array import array
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING

from quota.primitives.compiled import load_compiled

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


_DEFAULT_WINDOW = QuotaWindow()
"""A rate's window unless told: Kafka's defaults."""

_NEVER = -(1 << 62)
"""A time before every other: a rate's :attr:`Rate._fresh_until` not known yet."""

_START, _LAST, _VALUE = 0, 1, 2
"""Where each of a sample's three numbers is in its slot of a rate's array (``SampledStat.Sample``'s fields)."""


class PureRate:
    """A windowed sum divided by the elapsed time, exactly as Kafka's ``Rate`` measures it: the reference of
    :data:`Rate`, which is this class or its C twin (see :func:`_load`).

    Values are recorded and measured at caller-supplied ``now_ms``; time must not go backwards. ``measure`` is in
    units per second (bytes/s for byte-rate quotas). See the module docstring for the start-up burst rule.

    The samples are three numbers each (start, last event, value: :data:`_START`, :data:`_LAST`, :data:`_VALUE`)
    in one ``array('d')``, slot after slot, rather than an object per sample: a rate is one object and one buffer
    however many samples it has, so a decision on one of a million tenants touches two places in memory for it, not
    one per sample and per number (and a tenant's rate takes 24 bytes a sample). Times are held as doubles, exact
    for any millisecond count below 2**53, and handed back as ints.
    """

    __slots__ = ("window", "_s", "_current", "_shape", "_held", "_fresh_until")

    def __init__(self, window: QuotaWindow = _DEFAULT_WINDOW) -> None:
        self.window = window
        self._s = array("d")
        self._current = 0  # the slot of the current sample
        self._shape = _shape(window)
        # At least the sum of the samples' positive values: no purge to come leaves more in the window (what
        # headroom_floor reads instead of measuring). Added to by each record, counted again when a slot is reused.
        self._held = 0.0
        # Before this time no sample is obsolete: the oldest last event plus the expiry age, as last found (samples'
        # last events only move forward, so it stays a lower bound; a record at an earlier time lowers it), so that a
        # purge's check is one comparison until then, not a pass over the samples.
        self._fresh_until = _NEVER

    @property
    def sample_count(self) -> int:
        """Samples held so far (at most ``num + 1``: recycled, never grown past it)."""
        return len(self._s) // 3

    # -- recording -------------------------------------------------------------------------------------------

    def record(self, value: float, now_ms: int) -> None:
        """Add ``value`` at ``now_ms`` (``SampledStat.record``). A negative value "unrecords"."""
        s = self._s
        if not s:
            s.extend((now_ms, now_ms, 0.0))
        i = self._current * 3
        if now_ms - s[i] >= self._shape[0]:  # the current sample is complete: the next one starts now
            i = self._advance(now_ms)
        s[i + _VALUE] += value
        s[i + _LAST] = now_ms
        if value > 0:
            self._held += value
        if now_ms < self._fresh_until - self._shape[1]:  # time went back: the oldest last event may be this one
            self._fresh_until = now_ms + self._shape[1]

    def _advance(self, now_ms: int) -> int:
        # One slot more than `num`: the oldest sample may still overlap the monitored window.
        self._current = current = (self._current + 1) % (self.window.num + 1)
        s = self._s
        i = current * 3
        if i >= len(s):
            s.extend((now_ms, now_ms, 0.0))
        else:
            s[i] = s[i + _LAST] = now_ms
            s[i + _VALUE] = 0.0
            self._count_held()
        return i

    def _count_held(self) -> None:
        """:attr:`_held` counted again from the samples (once per sample started, or a purge that reset one)."""
        self._held = sum(value for value in self._s[_VALUE::3] if value > 0)

    # -- measuring -------------------------------------------------------------------------------------------

    def _purge_obsolete_samples(self, now_ms: int) -> None:
        if now_ms < self._fresh_until:
            return  # none is obsolete (the usual case): found by one comparison
        s, expire_age = self._s, self._shape[1]
        if not s:
            return
        oldest_last = int(min(s[_LAST::3]))
        if now_ms - oldest_last < expire_age:
            self._fresh_until = oldest_last + expire_age  # none is obsolete before then: found by one pass in C
            return
        for i in range(0, len(s), 3):
            if now_ms - s[i + _LAST] >= expire_age:
                s[i] = s[i + _LAST] = now_ms
                s[i + _VALUE] = 0.0
        self._count_held()

    def total(self, now_ms: int) -> float:
        """The windowed sum at ``now_ms`` after purging obsolete samples (``WindowedSum.measure``)."""
        self._purge_obsolete_samples(now_ms)
        return sum(self._s[_VALUE::3])

    def window_size_ms(self, now_ms: int) -> int:
        """The elapsed time the sum is divided by (``Rate.windowSize``); at least ``(num - 1)`` windows, >= 1 ms."""
        self._purge_obsolete_samples(now_ms)
        if not self._s:
            self._s.extend((now_ms, now_ms, 0.0))  # as SampledStat.oldest() does
        return _elapsed_ms(now_ms - int(min(self._s[_START::3])), self._shape)

    def headroom(self, limit: float, now_ms: int) -> float:
        """``limit * window_size_ms(now_ms) / 1000 - total(now_ms)``: what may be recorded at ``now_ms`` before the
        rate passes ``limit``, with one purge (asked twice for every consumer's Fetch: as :meth:`window_size_ms`
        does it, without its calls)."""
        s, shape = self._s, self._shape
        if not s:
            s.extend((now_ms, now_ms, 0.0))  # as SampledStat.oldest() does
        elif now_ms >= self._fresh_until:  # one may be obsolete
            self._purge_obsolete_samples(now_ms)
        window_ms = _elapsed_ms(now_ms - int(min(s[_START::3])), shape)
        return limit * window_ms / 1000.0 - sum(s[_VALUE::3])

    def headroom_floor(self, limit: float) -> float:
        """A lower bound of :meth:`headroom` at any time from the last record on, found without the clock or a
        pass over the samples: ``limit`` over the least elapsed time a rate is divided by (``num - 1`` windows),
        less what the samples hold at most (:attr:`_held`; a purge only takes from it), less a millionth of both
        for the rounding of sums taken in another order. A quota far from binding is seen by this alone."""
        least = limit * self._shape[3]
        held = self._held
        return least - held - (least + held) * 1e-6

    def surely_within(self, limit: float, now_ms: int) -> bool:
        """True when :meth:`measure` at ``now_ms`` is certainly at most ``limit`` (:meth:`headroom_floor` not below
        0), found without measuring; the samples purged as measure would purge them, so what follows is the same
        whichever was asked. False says nothing: measure."""
        if now_ms >= self._fresh_until:  # one may be obsolete
            self._purge_obsolete_samples(now_ms)
        least = limit * self._shape[3]  # headroom_floor(limit) >= 0, inline
        held = self._held
        return least - held - (least + held) * 1e-6 >= 0

    def record_within(self, value: float, now_ms: int, limit: float) -> bool:
        """:meth:`record` then :meth:`surely_within` at the same ``now_ms``, in one call, leaving the samples as the
        two calls leave them and answering what the second answers (a Produce's ``producer_byte_rate`` record)."""
        s, shape = self._s, self._shape
        if not s:
            s.extend((now_ms, now_ms, 0.0))
        i = self._current * 3
        if now_ms - s[i] >= shape[0]:  # the current sample is complete: the next one starts now
            i = self._advance(now_ms)
        s[i + _VALUE] += value
        s[i + _LAST] = now_ms
        if value > 0:
            self._held += value
        fresh_until = self._fresh_until
        if now_ms < fresh_until - shape[1]:  # time went back: the oldest last event may be this one
            self._fresh_until = fresh_until = now_ms + shape[1]
        if now_ms >= fresh_until:  # one may be obsolete
            self._purge_obsolete_samples(now_ms)
        least = limit * shape[3]  # headroom_floor(limit) >= 0, inline
        held = self._held
        return least - held - (least + held) * 1e-6 >= 0

    def measure(self, now_ms: int) -> float:
        """The rate per second at ``now_ms`` (``Rate.measure`` with ``TimeUnit.SECONDS``): :meth:`total` divided
        by :meth:`window_size_ms`, with one purge."""
        s = self._s
        if not s:
            s.extend((now_ms, now_ms, 0.0))  # as SampledStat.oldest() does
        self._purge_obsolete_samples(now_ms)
        # the samples' sum in slot order and their oldest start, each one pass in C (a sample starts at or before now)
        oldest_start_ms = min(s[_START::3])
        return sum(s[_VALUE::3]) / (_elapsed_ms(now_ms - int(min(oldest_start_ms, now_ms)), self._shape) / 1000.0)

    def peek(self, now_ms: int) -> float:
        """What :meth:`measure` would return at ``now_ms``, changing nothing: obsolete samples count as the reset
        ones measure would make of them (empty, starting now). For metrics: a scrape never changes what a later
        quota check measures, and may read a rate from another thread while its owner records (the samples are
        copied in one step first)."""
        rate, _ = self.peek_with_window(now_ms)
        return rate

    def peek_with_window(self, now_ms: int) -> tuple[float, int]:
        """:meth:`peek` and the elapsed time (ms) it divided by, what :meth:`window_size_ms` would return: a
        throttle computed from both is the one a record now would be given (``quota.explain``). Changes nothing."""
        s = self._s.tolist()
        expire_age = self._shape[1]
        total = 0.0
        oldest_start_ms: float = now_ms
        for i in range(0, len(s), 3):
            if now_ms - s[i + _LAST] < expire_age:
                total += s[i + _VALUE]
                oldest_start_ms = min(oldest_start_ms, s[i])
        elapsed = _elapsed_ms(now_ms - int(oldest_start_ms), self._shape)
        return total / (elapsed / 1000.0), elapsed

    # -- copying (a restarted worker seeded from a peer's, quota.usage_seed) ----------------------------------------

    def samples(self, now_ms: int) -> list[tuple[int, int, float]]:
        """The samples not obsolete at ``now_ms`` with something in them, ``(start, last event, value)``, oldest
        first; changes nothing."""
        s, expire_age = self._s.tolist(), self._shape[1]
        found = [
            (int(s[i]), int(s[i + _LAST]), s[i + _VALUE])
            for i in range(0, len(s), 3)
            if now_ms - s[i + _LAST] < expire_age and s[i + _VALUE]
        ]
        return sorted(found)

    def seed(self, samples: list[tuple[int, int, float]], now_ms: int) -> None:
        """Take another rate's :meth:`samples` (same clock, same window), so this one measures what it measures.
        Only into a rate that has recorded nothing yet; one that has gets their sum at ``now_ms`` instead (counted
        for a whole window from now: never less than the other's)."""
        usable = sorted(
            (int(start), int(last), float(value)) for start, last, value in samples if start <= last <= now_ms
        )[-(self.window.num + 1) :]
        if not usable:
            return
        if self._s:
            self.record(sum(value for _, _, value in usable), now_ms)
            return
        for sample in usable:
            self._s.extend(sample)
        self._current = len(usable) - 1
        self._count_held()

    def __repr__(self) -> str:
        s = self._s
        samples = [(int(s[i]), int(s[i + _LAST]), s[i + _VALUE]) for i in range(0, len(s), 3)]
        return f"Rate(window={self.window!r}, samples(start_ms, last_event_ms, value)={samples!r})"


def _load() -> tuple[ModuleType | None, str]:
    """(the C twin's module, or None for :class:`PureRate`; a line saying which and why): the twin
    ``quota.primitives._rate`` when it is built (setup.py, from quota/primitives/native/, where a C compiler is
    present) and not switched off. It keeps the same samples and answers the same at every step
    (tests/quota/primitives/test_rate_native.py)."""
    module, path = load_compiled("quota.primitives._rate")
    if module is not None:
        module.configure(_DEFAULT_WINDOW)
    return module, path


_TWIN, RATE_PATH = _load()

if TYPE_CHECKING or _TWIN is None:  # typed as the pure class: the twin has its methods and attributes
    Rate = PureRate
else:

    class Rate(_TWIN.Rate):
        """Kafka's sampled-window rate in C (:class:`PureRate`'s twin), as a class of this module: pickled by this
        name, and its methods replaceable in a test as the pure class's are."""

        __slots__ = ()


def at_limit(limit: float, window: QuotaWindow, now_ms: int, less: float = 0.0) -> list[tuple[int, int, float]]:
    """Samples for :meth:`Rate.seed` as if ``limit`` a second had been recorded for the whole window up to
    ``now_ms`` (``less`` taken off the newest): a rate seeded with them measures ``limit``, less, and one sample
    leaves it a window, so what it lets through from then on is ``limit`` a second, with no start-up burst."""
    per_sample = limit * window.size_seconds
    samples = [
        (now_ms - i * window.size_ms, now_ms - i * window.size_ms, per_sample) for i in range(window.num - 1, 0, -1)
    ]
    if samples:
        start, last, value = samples[-1]
        samples[-1] = (start, last, max(0.0, value - less))
    return samples


def _elapsed_ms(elapsed_ms: int, shape: tuple[int, int, int, int]) -> int:
    """``Rate.windowSize``: the elapsed time padded to ``num - 1`` full windows, at least 1 ms."""
    size_ms, _, min_full_windows, _ = shape
    full_windows = elapsed_ms // size_ms
    if full_windows < min_full_windows:
        elapsed_ms += (min_full_windows - full_windows) * size_ms
    return max(elapsed_ms, 1)


@lru_cache(maxsize=64)
def _shape(window: QuotaWindow) -> tuple[int, int, int, int]:
    """``(size_ms, span_ms, num - 1, (num - 1) * size_seconds)`` of a window: one tuple shared by every rate of that
    window."""
    return window.size_ms, window.span_ms, window.num - 1, (window.num - 1) * window.size_seconds
