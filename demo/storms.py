"""``make demo``'s storms before the steady traffic, one quota each, every one judged from what its clients saw (the
producer-restart loop is in :mod:`demo.restarts`, the disk filling up in :mod:`demo.disk_fill`).

- The connection storm (:func:`connection_storm`): KIP-612's ``connection_creation_rate`` per IP.
- The topic-creation storm (:func:`topic_storm`): the controller mutation quota (KIP-599) rejecting creates over
  the quota. A kafka-python admin client (client-id ``demo-admin``, which speaks the strict CreateTopics versions)
  creates topics of STORM_PARTITIONS partitions one request after another for STORM_SECONDS, retrying at once
  whenever the client itself holds its requests for a ``throttle_time_ms`` it was given (a storm does not wait
  politely). Its quota is ``controller_mutation_rate`` R in the demo's config, with a burst B = R x
  controller.quota.window.num x size. The verdict: some creates were rejected with THROTTLING_QUOTA_EXCEEDED, and
  the partitions created stay within what the bucket allows, B + R x elapsed + one topic (a topic is admitted while
  tokens >= 0, so the last may overdraw).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from config.model import ProxyConfig
from proxy.codec.apis import API_VERSIONS
from proxy.codec.error_codes import THROTTLING_QUOTA_EXCEEDED

ADMIN = "demo-admin"
STORM_PARTITIONS = 10
STORM_SECONDS = 6


@dataclass(frozen=True)
class StormResult:
    created: int  # topics
    rejected: int
    other_errors: int
    elapsed_s: float
    allowed_partitions: float

    @property
    def ok(self) -> bool:
        return (
            self.rejected > 0 and self.other_errors == 0 and self.created * STORM_PARTITIONS <= self.allowed_partitions
        )

    def text(self) -> str:
        return (
            f"topic storm ({ADMIN}): {self.created + self.rejected + self.other_errors} creates of "
            f"{STORM_PARTITIONS} partitions in {self.elapsed_s:.1f} s: {self.created} created "
            f"({self.created * STORM_PARTITIONS} partitions, bucket allows {self.allowed_partitions:.0f}), "
            f"{self.rejected} rejected with THROTTLING_QUOTA_EXCEEDED"
            + (f", {self.other_errors} other errors" if self.other_errors else "")
            + f"  {'OK' if self.ok else 'FAIL'}"
        )


def topic_storm(
    bootstrap: str, config: ProxyConfig, report: Callable[[str], None], seconds: float = STORM_SECONDS
) -> StormResult:
    from kafka.admin import KafkaAdminClient
    from kafka.errors import NodeNotReadyError

    settings = config.settings
    rate = config.quotas.limit("controller_mutation_rate", "ANONYMOUS", ADMIN)
    burst = rate * settings.controller_quota_window_num * settings.controller_quota_window_size_seconds
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=ADMIN, request_timeout_ms=30000)
    created = rejected = other = 0
    started = time.monotonic()
    try:
        i = 0
        while time.monotonic() - started < seconds:
            name = f"storm-{i}"
            try:
                response = admin.create_topics(
                    {name: {"num_partitions": STORM_PARTITIONS, "replication_factor": 1}}, raise_errors=False
                )
            except NodeNotReadyError:  # kafka-python holds its own requests while throttle_time_ms runs
                time.sleep(0.05)
                continue
            i += 1
            code = response["topics"][0]["error_code"]
            if code == 0:
                created += 1
            elif code == THROTTLING_QUOTA_EXCEEDED:
                rejected += 1
            else:
                other += 1
    finally:
        admin.close()
    elapsed = time.monotonic() - started
    result = StormResult(created, rejected, other, elapsed, burst + rate * elapsed + STORM_PARTITIONS)
    report(result.text())
    return result


STORM_IP, CALM_IP = "127.0.0.2", "127.0.0.3"  # both loopback on Linux: two "hosts" on one machine
CONNECT_PER_S = 20
CONNECT_SECONDS = 4


@dataclass(frozen=True)
class ConnectResult:
    limit: float  # the storming IP's connection_creation_rate
    allowed: float  # what its sampled rate lets through in the run: the start-up allowance plus the rate
    storm: tuple[int, int, int]  # served, closed, pending, from STORM_IP
    calm: tuple[int, int, int]  # the same from CALM_IP
    skipped: str | None = None

    @property
    def ok(self) -> bool:
        if self.skipped is not None:
            return True
        served, closed, _ = self.storm
        return closed > 0 and served <= self.allowed and self.calm[0] == sum(self.calm)

    def text(self) -> str:
        if self.skipped is not None:
            return f"connection storm: skipped ({self.skipped})"
        return (
            f"connection storm: {CONNECT_PER_S} connects/s for {CONNECT_SECONDS} s from each of two IPs: "
            f"{STORM_IP} (connection_creation_rate {self.limit:g}/s) {self.storm[0]} served, {self.storm[1]} "
            f"closed after a hold (its rate allows {self.allowed:.0f}); {CALM_IP} (no quota) "
            f"{self.calm[0]}/{sum(self.calm)} served  {'OK' if self.ok else 'FAIL'}"
        )


async def connect_once(host: str, port: int, source_ip: str, timeout_s: float = 5.0) -> str:
    """One short-lived Kafka connection from ``source_ip``: an ApiVersions request. "served" when the broker's
    answer comes back, "closed" when the proxy closes the connection first, "pending" when nothing happens in time."""
    import asyncio
    import struct

    from proxy.codec.header import encode_request_header, frame

    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, local_addr=(source_ip, 0)), timeout_s
        )
    except TimeoutError:
        return "pending"
    try:
        writer.write(frame(encode_request_header(API_VERSIONS, 0, 7, "demo-connect")))
        size, correlation_id = struct.unpack(">ii", await asyncio.wait_for(reader.readexactly(8), timeout_s))
        return "served" if correlation_id == 7 else "closed"
    except (asyncio.IncompleteReadError, ConnectionResetError, BrokenPipeError):
        return "closed"
    except TimeoutError:
        return "pending"
    finally:
        writer.close()


def connection_storm(host: str, port: int, config: ProxyConfig, report: Callable[[str], None]) -> ConnectResult:
    """KIP-612's per-IP rate: a client that opens a connection per request, from STORM_IP (which has a
    connection_creation_rate in the demo's config), and a calm one doing the same from CALM_IP (no quota)."""
    import asyncio
    import errno

    from quota.managers.connection import NO_LIMITS

    limit = config.connections.ip_rate(STORM_IP) if config.connections is not NO_LIMITS else float("inf")
    window = config.settings
    allowed = limit * ((window.quota_window_num - 1) * window.quota_window_size_seconds + CONNECT_SECONDS + 1)

    async def storm(source_ip: str) -> tuple[int, int, int]:
        start, tasks = time.monotonic(), []
        for i in range(CONNECT_PER_S * CONNECT_SECONDS):
            await asyncio.sleep(max(0.0, start + i / CONNECT_PER_S - time.monotonic()))
            tasks.append(asyncio.ensure_future(connect_once(host, port, source_ip)))
        outcomes = await asyncio.gather(*tasks)
        return outcomes.count("served"), outcomes.count("closed"), outcomes.count("pending")

    async def both():
        return await asyncio.gather(storm(STORM_IP), storm(CALM_IP))

    try:
        storm_counts, calm_counts = asyncio.run(both())
        result = ConnectResult(limit, allowed, storm_counts, calm_counts)
    except OSError as exc:
        if exc.errno != errno.EADDRNOTAVAIL:
            raise
        result = ConnectResult(
            limit,
            allowed,
            (0, 0, 0),
            (0, 0, 0),
            skipped=f"this machine has no {STORM_IP} loopback address to connect from",
        )
    report(result.text())
    return result
