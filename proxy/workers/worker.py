"""One worker process: a :class:`~proxy.app.ProxyApp` on the listeners' ports shared with its peers
(SO_REUSEPORT), its operations endpoint on a loopback port of its own (the parent scrapes it), and its link to the
parent. It stops as a single proxy does on SIGTERM/SIGINT (draining for ``shutdown.grace.period.ms``), and also
when the parent is gone."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import signal
import socket
from dataclasses import dataclass

from config.model import Address, ListenerConfig, MetricsConfig, ProxyConfig

log = logging.getLogger(__name__)

SEED_WAIT_S = (
    5.0  # the longest a (re)started worker waits for a peer's quota state before accepting (10^5 entities: ~1 s)
)


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """What the parent tells a worker on its command line."""

    index: int
    fd: int  # its end of the link's Unix socket pair
    ports: dict[str, int]  # listener name -> the port the parent resolved (a configured port 0 included)

    def to_json(self) -> str:
        return json.dumps({"index": self.index, "fd": self.fd, "ports": self.ports})

    @classmethod
    def from_json(cls, text: str) -> WorkerSpec:
        raw = json.loads(text)
        return cls(int(raw["index"]), int(raw["fd"]), {str(k): int(v) for k, v in raw["ports"].items()})


def worker_config(config: ProxyConfig, index: int, ports: dict[str, int]) -> ProxyConfig:
    """The configuration worker ``index`` runs: each listener on the port the parent resolved, /metrics on a
    loopback port of its own (only the parent's ops port is the configured one), its usage log files tagged."""

    def bound(lc: ListenerConfig) -> ListenerConfig:
        port = ports.get(lc.name, lc.bind.port)
        return dataclasses.replace(lc, bind=Address(lc.bind.host, port))

    usage_log = config.usage_log
    if usage_log is not None:  # one file at a time per worker, in the same directory
        usage_log = dataclasses.replace(usage_log, file_tag=f".w{index}")
    return dataclasses.replace(
        config,
        listeners=tuple(bound(lc) for lc in config.listeners),
        metrics=MetricsConfig(Address("127.0.0.1", 0)),
        usage_log=usage_log,
    )


async def serve_worker(config: ProxyConfig, spec: WorkerSpec) -> None:
    from proxy.app import ProxyApp
    from proxy.workers.link import WorkerLink

    app = ProxyApp(worker_config(config, spec.index, spec.ports), reuse_port=True, shares_usage_topic=False)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    sock = socket.socket(fileno=spec.fd)
    link = WorkerLink(app, spec.index, sock, config.settings.quota_workers_sync_ms, stop.set)
    # A restarted worker takes a serving peer's quota state before it accepts a connection (issue 44, N17): until its
    # listeners open the kernel gives every new connection to the others, which know the tenants' usage.
    await app.start(accept=False)
    await link.start()
    if not await link.seeded(SEED_WAIT_S):
        log.warning("worker %d: no peer's quota state within %g s: serving from its own", spec.index, SEED_WAIT_S)
    await app.start_accepting()
    log.info("worker %d serving", spec.index)
    await stop.wait()
    log.info("worker %d stopping (grace %d ms)", spec.index, config.settings.shutdown_grace_period_ms)
    await app.stop()
    await link.close()
