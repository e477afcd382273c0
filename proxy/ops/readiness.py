"""Readiness (``/readyz``): whether a broker answers Kafka, set by every upstream connect and re-checked by a
background ApiVersions probe."""

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


class Readiness:
    """Whether the broker is reachable: set by every upstream connect, re-checked by a background probe."""

    def __init__(self, kafka: OwnKafka, timeout_s: float, metrics: ProxyMetrics) -> None:
        self._kafka = kafka
        self._timeout_s = timeout_s
        self._metrics = metrics
        self.ready = False
        self._task: asyncio.Task | None = None

    def report(self, reachable: bool) -> None:
        if reachable != self.ready:
            log.info("broker %s", "reachable: ready" if reachable else "unreachable: not ready")
        self.ready = reachable
        self._metrics.upstream_ready.set(1 if reachable else 0)

    async def probe_once(self) -> bool:
        """Ready when a broker answers Kafka: an ApiVersions v0 round trip within the connect timeout (a broker
        whose port accepts TCP but which does not answer, e.g. a stopped process, is not ready)."""
        request = new_request(API_VERSIONS, PROBE_VERSION)
        for address in self._kafka.bootstrap:
            try:
                await ask(address, API_VERSIONS, PROBE_VERSION, request, self._timeout_s, READINESS_CLIENT_ID,
                          self._kafka.ssl_context)
                return True
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    return self.ready  # the proxy's own limit says nothing about the broker
                continue
            except ASK_ERRORS:
                continue
        return False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            self.report(await self.probe_once())
            await asyncio.sleep(PROBE_INTERVAL_READY_S if self.ready else PROBE_INTERVAL_NOT_READY_S)

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
