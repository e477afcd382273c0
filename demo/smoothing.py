"""``make demo``'s smoothing phase: the same throttled producer with ``quota.smoothing`` off, then on.

A confluent-kafka producer (default settings, 1 KiB messages, client-id ``demo-smooth``, under the demo config's
``producer_byte_rate`` for it) writes flat out for one quota window span and a second, twice: first with Kafka's
sampled-rate throttle (``quota.smoothing: off``), then with ``quota.smoothing: on``, each set as an operator sets
it, through the dynamic config (IncrementalAlterConfigs on the cluster default, what ``kafka-quota-proxy configs
--entity-type brokers --entity-default --alter --add-config quota.smoothing=on`` sends); afterwards the dynamic
value is deleted, so the configuration's own applies to the rest of the demo. Each second the proxy's count of the
bytes it admitted for the producer is read (``kafka_quota_proxy_quota_bytes_total``); the two runs' rates per
second are then printed side by side.

Off: a fresh entity's burst of ``quota.window.num - 1`` windows, then almost nothing until its oldest sample leaves
the window, then a burst again (Kafka's stop-and-go). On: about the quota every second, in steps of one request:
librdkafka's default request is up to 1 MB, so the demo's config gives this producer 4 MiB/s, four requests a
second (under 1 MiB/s a second would hold none, one or two). The verdict is on the run with smoothing on, after its
first second (the bucket's burst and the first debt): at least SMOOTH_SHARE of the seconds within SMOOTH_BAND x the
quota, and an average within SMOOTH_AVERAGE x; the run with smoothing off is shown, not judged (the steady traffic
judges Kafka's algorithm).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from config.model import ProxyConfig

SMOOTH = "demo-smooth"
SMOOTH_BAND, SMOOTH_SHARE = (0.5, 1.5), 0.75  # issue 25's target is 90 % of seconds over a longer run
SMOOTH_AVERAGE = (0.75, 1.25)
VALUE = b"s" * 1024


@dataclass(frozen=True)
class SmoothingResult:
    quota: float  # bytes/s
    off: tuple[float, ...]  # rate / quota, each second
    on: tuple[float, ...]

    @property
    def judged(self) -> tuple[float, ...]:
        return self.on[1:]

    @property
    def ok(self) -> bool:
        judged = self.judged
        return (
            bool(judged)
            and self.in_band >= SMOOTH_SHARE
            and SMOOTH_AVERAGE[0] <= sum(judged) / len(judged) <= SMOOTH_AVERAGE[1]
        )

    @property
    def in_band(self) -> float:
        judged = self.judged
        return sum(SMOOTH_BAND[0] <= r <= SMOOTH_BAND[1] for r in judged) / len(judged) if judged else 0.0

    def text(self) -> str:
        def row(name: str, ratios: tuple[float, ...]) -> str:
            return f"  {name:6}" + "".join(f"{r:6.2f}" for r in ratios)

        judged = self.judged
        average = sum(judged) / len(judged) if judged else 0.0
        return "\n".join(
            [
                f"smoothing ({SMOOTH}, confluent-kafka default settings, {self.quota / 2**20:.2f} MiB/s "
                "producer_byte_rate): bytes admitted each second / quota",
                "  second" + "".join(f"{i:6d}" for i in range(1, max(len(self.off), len(self.on)) + 1)),
                row("off", self.off),
                row("on", self.on),
                f"smoothing off: peak {max(self.off, default=0):.2f} x, {sum(r < 0.5 for r in self.off)} of "
                f"{len(self.off)} seconds under 0.5 x; on, after its "
                f"first second: {min(judged, default=0):.2f}-{max(judged, default=0):.2f} x, {self.in_band:.0%} of seconds "
                f"in {SMOOTH_BAND[0]}-{SMOOTH_BAND[1]} x, average {average:.2f} x (ok: >= {SMOOTH_SHARE:.0%}, "
                f"{SMOOTH_AVERAGE[0]}-{SMOOTH_AVERAGE[1]} x)  " + ("OK" if self.ok else "FAIL"),
            ]
        )


def produce_for(bootstrap: str, seconds: int, admitted: Callable[[], float], quota: float) -> tuple[float, ...]:
    """A flat-out producer for ``seconds``; the proxy's admitted bytes for it each second / ``quota``."""
    from confluent_kafka import Producer

    stop = threading.Event()
    failed: list[BaseException] = []

    def produce() -> None:
        try:
            producer = Producer({"bootstrap.servers": bootstrap, "client.id": SMOOTH})
            while not stop.is_set():
                try:
                    producer.produce(SMOOTH, VALUE)
                except BufferError:  # the client's queue is full: it is being throttled
                    producer.poll(0.05)
                    continue
                producer.poll(0)
            producer.purge()
            producer.flush(5)
        except BaseException as exc:  # reported below
            failed.append(exc)

    thread = threading.Thread(target=produce, name=f"{SMOOTH} producer", daemon=True)
    counts = [read_count(admitted)]
    started = counts[0][0]
    thread.start()
    try:
        for i in range(1, seconds + 1):
            time.sleep(max(0.0, started + i - time.monotonic()))
            counts.append(read_count(admitted))
    finally:
        stop.set()
        thread.join(10)
    if failed:
        raise failed[0]
    return per_second(counts, quota)


def read_count(admitted: Callable[[], float]) -> tuple[float, float]:
    """(when, count): the time is the middle of the read, which is a scrape of the proxy's /metrics."""
    before = time.monotonic()
    count = admitted()
    return (before + time.monotonic()) / 2, count


def per_second(counts: list[tuple[float, float]], quota: float) -> tuple[float, ...]:
    """Each interval's rate / ``quota``, over the time the interval really lasted: on a busy machine a read comes
    late, and a late read divided by one second would show the next second's bytes in this one (a 1.9 x followed
    by a 0 x where the producer ran at its quota)."""
    return tuple((b - a) / max(tb - ta, 1e-3) / quota for (ta, a), (tb, b) in zip(counts, counts[1:]))


def switch(admin, value: str | None, expected: str) -> None:
    """``quota.smoothing`` set dynamically (None: the dynamic value deleted, so the YAML's applies again) on a
    :class:`proxy.cli.quota_admin.QuotaAdmin`, as the configs command sets it; returns once ``expected`` is in
    force."""
    admin.alter_settings({} if value is None else {"quota.smoothing": value}, [] if value else ["quota.smoothing"])
    deadline = time.monotonic() + 15
    while admin.describe_settings()["quota.smoothing"][0] != expected:
        if time.monotonic() > deadline:
            raise TimeoutError(f"quota.smoothing={value} written but not {expected} in force after 15 s")
        time.sleep(0.1)


def smoothing_phase(
    bootstrap: str, config: ProxyConfig, report: Callable[[str], None], admitted: Callable[[], float]
) -> SmoothingResult:
    """Off, then on, each set dynamically, then the configuration's own value again; ``admitted()`` reads the
    proxy's count."""
    quota = config.quotas.limit("producer_byte_rate", "ANONYMOUS", SMOOTH)
    from proxy.cli.quota_admin import QuotaAdmin

    seconds = config.settings.quota_window_num * config.settings.quota_window_size_seconds + 1
    with QuotaAdmin(bootstrap, {}) as admin:
        switch(admin, "off", "off")
        report(f"smoothing: {SMOOTH} producing flat out for {seconds} s with quota.smoothing off  WAIT")
        off = produce_for(bootstrap, seconds, admitted, quota)
        switch(admin, "on", "on")
        report(f"smoothing: quota.smoothing set to on (dynamic config); {SMOOTH} again for {seconds} s  WAIT")
        on = produce_for(bootstrap, seconds, admitted, quota)
        # back to the configuration's own value for the rest (a failure or a signal ends the demo: nothing to undo)
        switch(admin, None, config.settings.quota_smoothing)
    result = SmoothingResult(quota, off, on)
    report(result.text())
    return result
