"""Readiness (``/readyz``): whether a broker answers Kafka, set by every upstream connect and re-checked by a
background ApiVersions probe.

While no broker answers the probe, the log says so with each address and its error: the first failure at once,
then at most one line per :data:`UNREACHABLE_LOG_INTERVAL_S` while it lasts (a proxy started in front of a wrong
address must not be silent, nor write a line a second)."""

from __future__ import annotations

import asyncio
import errno
import logging

from proxy.cluster.kafka_clients import ASK_ERRORS, OwnKafka, ask
from proxy.codec.apis import API_VERSIONS
from proxy.codec.messages import new_request
from proxy.ground.tasks import cancel_and_wait
from proxy.ops.metrics import ProxyMetrics

log = logging.getLogger(__name__)

PROBE_INTERVAL_READY_S = 5.0
PROBE_INTERVAL_NOT_READY_S = 1.0
READINESS_CLIENT_ID = "kafka-quota-proxy-readiness"  # not the acks=0 probe's: a broker's logs tell them apart
PROBE_VERSION = 0  # every broker answers ApiVersions v0
UNREACHABLE_LOG_INTERVAL_S = 30.0


class UnreachableNotice:
    """When to warn that no broker answers: the first failed probe, then once per ``interval_s`` while they go on
    failing; a probe that succeeds starts over. Pure: the caller passes the time."""

    def __init__(self, interval_s: float = UNREACHABLE_LOG_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.ever_reachable = False
        self._failing_since: float | None = None
        self._last_said: float | None = None

    def failed(self, now: float) -> float | None:
        """None: say nothing now. Otherwise warn, saying it has failed for the returned number of seconds."""
        if self._failing_since is None:
            self._failing_since = now
        if self._last_said is not None and now - self._last_said < self.interval_s:
            return None
        self._last_said = now
        return now - self._failing_since

    def succeeded(self) -> None:
        self.ever_reachable = True
        self._failing_since = self._last_said = None


class Readiness:
    """Whether the broker is reachable: set by every upstream connect, re-checked by a background probe."""

    def __init__(self, kafka: OwnKafka, timeout_s: float, metrics: ProxyMetrics) -> None:
        self._kafka = kafka
        self._timeout_s = timeout_s
        self._metrics = metrics
        self.ready = False
        self._task: asyncio.Task | None = None
        self.notice = UnreachableNotice()
        self.last_errors: list[str] = []  # the last probe's failures, one "address: error" each

    def report(self, reachable: bool) -> None:
        if reachable != self.ready:
            log.info("broker %s", "reachable: ready" if reachable else "unreachable: not ready")
        self.ready = reachable
        if reachable:
            self.notice.succeeded()
        self._metrics.upstream_ready.set(1 if reachable else 0)

    async def probe_once(self) -> bool:
        """Ready when a broker answers Kafka: an ApiVersions v0 round trip within the connect timeout (a broker
        whose port accepts TCP but which does not answer, e.g. a stopped process, is not ready)."""
        request = new_request(API_VERSIONS, PROBE_VERSION)
        errors = []
        for address in self._kafka.bootstrap:
            try:
                await ask(
                    address,
                    API_VERSIONS,
                    PROBE_VERSION,
                    request,
                    self._timeout_s,
                    READINESS_CLIENT_ID,
                    self._kafka.ssl_context,
                )
                self.last_errors = []
                return True
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    return self.ready  # the proxy's own limit says nothing about the broker
                errors.append(f"{address}: {_error_text(exc)}")
            except ASK_ERRORS as exc:
                errors.append(f"{address}: {_error_text(exc)}")
        self.last_errors = errors
        return False

    async def check(self) -> None:
        """One probe, its result reported, and a warning while no broker answers (rate-limited)."""
        reachable = await self.probe_once()
        self.report(reachable)
        if reachable:
            return
        failing_for = self.notice.failed(asyncio.get_running_loop().time())
        if failing_for is not None:
            since = "since start-up" if not self.notice.ever_reachable else "now"
            lasting = f" ({failing_for:.0f} s)" if failing_for >= 1 else ""
            log.warning(
                "no broker has answered %s%s, /readyz says 503: %s",
                since,
                lasting,
                "; ".join(self.last_errors) or "no answer",
            )

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await self.check()
            await asyncio.sleep(PROBE_INTERVAL_READY_S if self.ready else PROBE_INTERVAL_NOT_READY_S)

    async def stop(self) -> None:
        await cancel_and_wait(self._task)


def _error_text(exc: BaseException) -> str:
    """An error as a log line shows it: its message, or its kind when it has none (a timeout)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
