"""Readiness (``/readyz``): whether a broker answers Kafka, set by every upstream connect and re-checked by a
background ApiVersions probe."""

from __future__ import annotations

import asyncio
import errno
import logging
import struct

from config.model import Address
from proxy.codec.apis import API_VERSIONS
from proxy.codec.header import encode_request_header, frame
from proxy.ops.metrics import ProxyMetrics
from proxy.tasks import cancel_and_wait

log = logging.getLogger(__name__)

PROBE_INTERVAL_READY_S = 5.0
PROBE_INTERVAL_NOT_READY_S = 1.0
PROBE_CORRELATION_ID = 1
READINESS_CLIENT_ID = "kafka-quota-proxy-readiness"  # not the acks=0 probe's: a broker's logs tell them apart
MAX_PROBE_RESPONSE = 1 << 20


class Readiness:
    """Whether the broker is reachable: set by every upstream connect, re-checked by a background probe."""

    def __init__(self, upstreams: tuple[Address, ...], timeout_s: float, metrics: ProxyMetrics,
                 ssl_context=None) -> None:
        self._ssl = ssl_context
        self._upstreams = upstreams
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
        for address in self._upstreams:
            try:
                if await asyncio.wait_for(self._answers_api_versions(address, self._ssl), self._timeout_s):
                    return True
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    return self.ready  # the proxy's own limit says nothing about the broker
                continue
            except (asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
                continue
        return False

    @staticmethod
    async def _answers_api_versions(address: Address, ssl_context=None) -> bool:
        reader, writer = await asyncio.open_connection(address.host, address.port, ssl=ssl_context,
                                                       server_hostname=address.host if ssl_context else None)
        try:
            writer.write(frame(encode_request_header(API_VERSIONS, 0, PROBE_CORRELATION_ID, READINESS_CLIENT_ID)))
            await writer.drain()
            size, correlation_id = struct.unpack(">ii", await reader.readexactly(8))
            return correlation_id == PROBE_CORRELATION_ID and 4 <= size <= MAX_PROBE_RESPONSE
        finally:
            writer.close()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            self.report(await self.probe_once())
            await asyncio.sleep(PROBE_INTERVAL_READY_S if self.ready else PROBE_INTERVAL_NOT_READY_S)

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
