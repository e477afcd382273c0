"""The per-entity quota series (one per busy entity, plus ``__other__``) at scale: built in the background and served
as they were last built, so a scrape does not walk every sensor.

Below :data:`BACKGROUND_FROM_ENTITIES` quota entities (or with ``quota.metrics.refresh.ms: 0``) a scrape builds them
itself, as before (a few tens of milliseconds). Above it, walking 2 x 10^6 sensors and formatting the top series
takes the scrape thread over a second, so:

* a builder thread rebuilds them (selection, sums, and the text exposition) every ``quota.metrics.refresh.ms``, ahead
  of time by twice the last build's duration (and a tenth of the interval), so that a build is done before the last
  one is ``refresh.ms`` old unless it takes more than twice as long;
* a scrape serves the text of the last build when that build started at most ``refresh.ms`` ago; otherwise (the
  first scrape, or the first after the builder stopped) it waits for a fresh build;
* the builder runs only while someone scrapes: after :data:`IDLE_REFRESHES` refresh intervals without a scrape it
  stops until the next one.

So every value served was read at most ``refresh.ms`` before the scrape that serves it. :class:`RefreshSchedule` is
the timing, pure (milliseconds in, decisions out); :class:`EntitySeries` the thread around it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

BACKGROUND_FROM_ENTITIES = 100_000
"""Quota entities (byte-rate sensors, producer-id users, mutation entities) above which the per-entity series are
built in the background: below it a build takes a scrape a few tens of milliseconds at most."""

IDLE_REFRESHES = 3
"""Refresh intervals without a scrape after which the builder stops (until the next scrape)."""


class RefreshSchedule:
    """When the per-entity series are built and whether the last build may be served. Pure: every method takes
    the time (ms, monotonic) and changes nothing but this object."""

    def __init__(self, refresh_ms: int, background_from: int = BACKGROUND_FROM_ENTITIES) -> None:
        if refresh_ms < 0:
            raise ValueError(f"refresh_ms must be >= 0, got {refresh_ms}")
        self.refresh_ms = refresh_ms
        self.background_from = background_from
        self.built_at: int | None = None  # when the last build started: its values were read from then on
        self.build_ms = 0  # how long the last build took
        self.scraped_at: int | None = None

    def inline(self, entities: int) -> bool:
        """Whether a scrape builds the series itself (few entities, or no refresh interval)."""
        return self.refresh_ms == 0 or entities <= self.background_from

    def scraped(self, now_ms: int) -> None:
        self.scraped_at = now_ms

    def servable(self, now_ms: int) -> bool:
        """Whether the last build may be served now: it started at most ``refresh_ms`` ago."""
        return self.built_at is not None and now_ms - self.built_at <= self.refresh_ms

    def built(self, started_ms: int, finished_ms: int) -> None:
        self.built_at = started_ms
        self.build_ms = max(0, finished_ms - started_ms)

    def next_build_at(self) -> int | None:
        """When the builder should start the next build: early enough that it is done before the last build is
        ``refresh_ms`` old even if it takes twice as long as the last one (plus a tenth of the interval: a loaded
        machine makes builds slower); None before the first build."""
        if self.built_at is None:
            return None
        return self.built_at + max(0, self.refresh_ms - 2 * self.build_ms - self.refresh_ms // 10)

    def idle(self, now_ms: int) -> bool:
        """No scrape for :data:`IDLE_REFRESHES` intervals: the builder stops building."""
        return self.scraped_at is None or now_ms - self.scraped_at > IDLE_REFRESHES * self.refresh_ms


class EntitySeries:
    """The per-entity series' text exposition, for ``/metrics``: ``render`` builds it (in whatever thread calls it;
    it pauses between chunks of its work so the event loop is not held), ``entities`` counts what it would walk.

    :meth:`scrape` is called by the scrape thread at the start of each exposition: it latches :attr:`inline` for
    that scrape (the collector then yields the series itself) or returns the last build's text."""

    def __init__(
        self,
        render: Callable[[], bytes],
        entities: Callable[[], int],
        clock,
        refresh_ms: int,
        background_from: int = BACKGROUND_FROM_ENTITIES,
        quiet=None,
    ) -> None:
        self._render = render
        self._entities = entities
        self._clock = clock  # anything with now_ms()
        self.schedule = RefreshSchedule(refresh_ms, background_from)
        self._quiet = (
            quiet  # a context manager for a build (proxy.ground.quiet.quiet: GC paused, short switch interval)
        )
        self._text = b""
        self._build_lock = threading.Lock()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.inline = True  # latched per scrape; True until the first scrape finds many entities
        self.builds = 0

    def scrape(self) -> bytes:
        """In the scrape thread: b"" when the collector is to build the series this scrape, else the last build's
        text (waiting for a fresh one when it is older than the refresh interval)."""
        now = self._clock.now_ms()
        with self._wake:
            self.schedule.scraped(now)
            self._wake.notify()
        self.inline = self.schedule.inline(self._entities())
        if self.inline:
            return b""
        if not self.schedule.servable(now):
            with self._build_lock:  # a build under way finishes first; then it may be fresh enough
                if not self.schedule.servable(self._clock.now_ms()):
                    self._build_locked()
            self._start_builder()
        return self._text

    def build_now(self) -> None:
        """One build, now, in this thread (the builder's step; tests call it)."""
        with self._build_lock:
            self._build_locked()

    def _build_locked(self) -> None:
        started = self._clock.now_ms()
        if self._quiet is not None:
            with self._quiet():
                text = self._render()
        else:
            text = self._render()
        self._text = text
        self.schedule.built(started, self._clock.now_ms())
        self.builds += 1

    def _start_builder(self) -> None:
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._run, name="metrics-entity-series", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._wake:
                if self._closed:
                    return
                now = self._clock.now_ms()
                due = None if self.schedule.idle(now) else self.schedule.next_build_at()
                if due is None or now < due:
                    self._wake.wait(None if due is None else (due - now) / 1000.0)
                    continue
            try:
                self.build_now()
            except Exception:  # the next scrape builds (and reports) it itself
                log.exception("metrics: building the per-entity quota series failed")
                with self._wake:
                    self._wake.wait(self.schedule.refresh_ms / 1000.0)

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
