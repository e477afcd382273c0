"""The parent of ``workers: N``: it reserves the listeners' ports, starts N worker processes
(:mod:`proxy.workers.worker`) and restarts one that dies (a log line, ``worker_restarts_total``), passes each
worker's usage deltas on to the others (:mod:`proxy.workers.relay` reads the workers' links), restarts one that stops answering (no frame on its link, not even its
heartbeat, for ``workers.heartbeat.timeout.ms``: SIGSTOP, a stuck loop; /readyz says so from half that), and serves the one operations endpoint: /metrics (its own metrics and every
worker's, labelled ``worker``), /readyz (ready while every worker is) and /healthz. With ``quota.cluster.topic`` it
is also the proxy's one member of the usage topic (:mod:`proxy.workers.cluster_relay`).

SIGTERM or SIGINT: every worker is sent SIGTERM and drains for ``shutdown.grace.period.ms``; one still running
after that and a margin is killed. The parent exits 0, or non-zero only when it must: a worker that fails on its
first start (a port it cannot bind, a configuration it rejects) stops them all, with that worker's exit code."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import sys
import time
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge

from config.model import ProxyConfig
from proxy.ground.tasks import cancel_and_wait
from proxy.ops.http import OpsServer, build_exposition
from proxy.ops.metrics import PREFIX
from proxy.ops.runtime import register_runtime
from proxy.workers.explain import WorkersExplainer
from proxy.workers.frames import BEAT_INTERVAL_S, GONE, pack
from proxy.workers.ports import reserve_ports
from proxy.workers.relay import Relay
from proxy.workers.scrape import workers_exposition
from proxy.workers.slot import Slot
from proxy.workers.worker import WorkerSpec
from quota.explain.explain import cluster_budget

if TYPE_CHECKING:
    from proxy.workers.cluster_relay import WorkersClusterUsage

log = logging.getLogger(__name__)

STOP_MARGIN_S = 5.0  # past the grace period, a worker still running is killed
RESTART_BACKOFF_S = (0.1, 5.0)  # first and longest wait before a restart (doubling while it keeps dying young)
STABLE_S = 10.0  # a worker that ran this long resets the back-off


class Supervisor:
    def __init__(self, config: ProxyConfig, config_path: str, log_level: str, log_format: str = "text") -> None:
        self.config = config
        self.config_path = config_path
        self.log_level = log_level
        self.log_format = log_format
        self.count = config.settings.workers
        self.slots = [Slot(i) for i in range(self.count)]
        self.registry = CollectorRegistry()
        register_runtime(self.registry)  # the parent's own process; each worker's come labelled with it
        Gauge(f"{PREFIX}_workers", "Worker processes configured (settings.workers).", registry=self.registry).set(
            self.count
        )
        alive = Gauge(f"{PREFIX}_workers_alive", "Worker processes running now.", registry=self.registry)
        alive.set_function(lambda: sum(1 for s in self.slots if s.process is not None and s.hello))
        self.restarts = Counter(
            f"{PREFIX}_worker_restarts",
            "Workers restarted after they died, by worker.",
            ["worker"],
            registry=self.registry,
        )
        self.forwarded = Counter(
            f"{PREFIX}_worker_deltas_forwarded",
            "Usage deltas the parent passed from one "
            "worker to another (dropped: the receiving worker's link was backed up).",
            ["outcome"],
            registry=self.registry,
        )
        self.unresponsive = Counter(
            f"{PREFIX}_worker_unresponsive",
            "Workers killed (and restarted) because they "
            "sent nothing on their link, not even a heartbeat, for workers.heartbeat.timeout.ms.",
            ["worker"],
            registry=self.registry,
        )
        self.heartbeat_timeout_s = config.settings.workers_heartbeat_timeout_ms / 1000.0
        self.scrape_failures = Counter(
            f"{PREFIX}_worker_scrape_failures",
            "Scrapes of a worker's metrics that got no answer (that worker is left out of the scrape).",
            ["worker"],
            registry=self.registry,
        )
        for slot in self.slots:  # every series at 0 from the start, so increase() sees a first restart
            self.restarts.labels(str(slot.index))
            self.unresponsive.labels(str(slot.index))
        for outcome in ("forwarded", "dropped"):
            self.forwarded.labels(outcome)
        self.relay = Relay(
            self.slots, self.forwarded, self._worker_usage, self._eager, time.monotonic, lambda: self.stopping
        )
        # quota.cluster.topic: the usage topic's publisher and follower (made at start)
        self.cluster: WorkersClusterUsage | None = None
        self.explainer = WorkersExplainer(
            tuple(lc.name for lc in config.listeners), self._worker_ports, self._cluster_budget
        )
        self.ops = OpsServer(
            self.registry, self.not_ready, self._exposition, ready_note=self.ready_note, explain=self.explainer.answer
        )
        self.ops_address: tuple[str, int] | None = None
        self.ports: dict[str, int] = {}
        self._held: list[socket.socket] = []
        self.stopping = False
        self.exit_code = 0
        self._stop = asyncio.Event()

    def not_ready(self) -> str | None:
        if self.stopping:
            return "shutting down"
        for slot in self.slots:
            if not slot.hello:
                return f"worker {slot.index} is not running"
            silent = time.monotonic() - slot.last_heard
            if silent > self.heartbeat_timeout_s / 2:
                return f"worker {slot.index} has not answered for {silent:.1f} s"
            if slot.not_ready:
                return f"worker {slot.index}: {slot.not_ready}"
        return None

    def ready_note(self) -> str | None:
        cluster = self.cluster
        return None if cluster is None else cluster.note

    def _worker_usage(self, payload: bytes) -> None:
        """A worker's usage delta: part of the usage topic's next record (quota.cluster.topic)."""
        if self.cluster is not None:
            self.cluster.worker_usage(payload)

    def _eager(self) -> None:
        """A worker's usage grew fast: the usage topic's record goes early (quota.cluster.topic)."""
        if self.cluster is not None:
            self.cluster.eager()

    def _cluster_budget(self) -> str | None:
        """/explain's note: the budget the parent keeps on the usage topic for every worker (quota.cluster.topic)."""
        usage = None if self.cluster is None else self.cluster.usage
        return None if usage is None else cluster_budget("cluster", peers=usage.peers.peek(usage.wall.now_ms()))

    def _worker_ports(self) -> list[tuple[int, int]]:
        """(index, loopback ops port) of every live worker: what /metrics and /explain gather from."""
        return [(s.index, s.ops_port) for s in self.slots if s.hello and s.ops_port]

    def _exposition(self) -> bytes:
        own = build_exposition(self.registry).decode()
        return workers_exposition(own, self._worker_ports(), lambda i: self.scrape_failures.labels(str(i)).inc())

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        await self.start()
        await self._stop.wait()
        await self.stop()
        return self.exit_code

    def request_stop(self) -> None:
        self._stop.set()

    async def start(self) -> None:
        self.ports, self._held = reserve_ports(self.config)
        bind = self.config.metrics.bind
        self.ops_address = await self.ops.start(bind.host, bind.port)
        log.info(
            "supervising %d workers on %s; metrics on http://%s:%d/metrics",
            self.count,
            ", ".join(f"{name} port {port}" for name, port in self.ports.items()),
            *self.ops_address,
        )
        if self.config.settings.quota_cluster_topic is not None:
            from proxy.workers.cluster_relay import WorkersClusterUsage

            self.cluster = WorkersClusterUsage(
                self.config, self.registry, self.ports, lambda frame: self.relay.forward(None, frame, counted=False)
            )
            await self.cluster.start()
        loop = asyncio.get_running_loop()
        self._supervisors = [loop.create_task(self._supervise(slot)) for slot in self.slots]
        self._supervisors.append(loop.create_task(self._watch()))

    async def _watch(self) -> None:
        """Kill a serving worker that has sent nothing for the heartbeat timeout (it is restarted as after any
        exit): a stopped or stuck process still holds its share of the listeners' SO_REUSEPORT connections."""
        last = time.monotonic()
        while not self.stopping:
            await asyncio.sleep(BEAT_INTERVAL_S / 2)
            now, late = time.monotonic(), time.monotonic() - last > BEAT_INTERVAL_S * 2
            last = now
            if late:  # this loop was stalled itself: the links' frames are read before anyone is judged silent
                continue
            for slot in self.slots:
                process = slot.process
                if not slot.hello or slot.silenced or process is None or process.returncode is not None:
                    continue
                silent = now - slot.last_heard
                if silent > self.heartbeat_timeout_s:
                    log.error(
                        "worker %d (pid %d) has sent nothing for %.1f s (workers.heartbeat.timeout.ms %d): killing it",
                        slot.index,
                        process.pid,
                        silent,
                        self.heartbeat_timeout_s * 1000,
                    )
                    slot.silenced = True
                    self.unresponsive.labels(str(slot.index)).inc()
                    process.kill()

    async def _supervise(self, slot: Slot) -> None:
        failures = 0
        while not self.stopping:
            started = time.monotonic()
            code = await self._run_once(slot)
            if self.stopping:
                return
            if not slot.started_once:
                log.error(
                    "worker %d exited with %s before it was serving: stopping every worker", slot.index, _describe(code)
                )
                self.exit_code = code if code and code > 0 else 1
                self._stop.set()
                return
            failures = 0 if time.monotonic() - started >= STABLE_S else failures + 1
            delay = min(RESTART_BACKOFF_S[1], RESTART_BACKOFF_S[0] * 2 ** max(0, failures - 1))
            log.warning(
                "worker %d (pid %s) exited with %s: restarting it in %.1f s",
                slot.index,
                slot.process.pid if slot.process else "?",
                _describe(code),
                delay,
            )
            self.restarts.labels(str(slot.index)).inc()
            await asyncio.sleep(delay)

    async def _run_once(self, slot: Slot) -> int | None:
        ours, theirs = socket.socketpair()
        spec = WorkerSpec(slot.index, theirs.fileno(), self.ports)
        try:
            slot.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "proxy.cli",
                "run",
                "--config",
                self.config_path,
                "--log-level",
                self.log_level,
                "--log-format",
                self.log_format,
                "--worker",
                spec.to_json(),
                pass_fds=(theirs.fileno(),),
            )
        finally:
            theirs.close()
        slot.hello, slot.not_ready, slot.silenced = False, "starting", False
        reader, slot.writer = await asyncio.open_unix_connection(sock=ours)
        slot.reader_task = asyncio.get_running_loop().create_task(self.relay.read(slot, reader))
        code = await slot.process.wait()
        await cancel_and_wait(slot.reader_task)
        slot.writer.close()
        slot.writer, slot.hello, slot.ops_port = None, False, None
        self.relay.ledger.forget(str(slot.index))
        self.relay.forward(slot, pack(GONE, str(slot.index).encode()), counted=False)  # its connections went with it
        return code

    async def stop(self) -> None:
        """Every worker drains (SIGTERM) within the grace period and a margin, or is killed."""
        self.stopping = True
        grace_s = self.config.settings.shutdown_grace_period_ms / 1000.0
        log.info("stopping %d workers (grace %g s)", self.count, grace_s)
        running = [s.process for s in self.slots if s.process is not None and s.process.returncode is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        waits = [asyncio.ensure_future(p.wait()) for p in running]
        if waits:
            done, pending = await asyncio.wait(waits, timeout=grace_s + STOP_MARGIN_S)
            for process in running:
                if process.returncode is None:
                    log.warning("worker pid %d still running after the grace period: killed", process.pid)
                    process.kill()
            if pending:
                await asyncio.wait(pending)
        for task in getattr(self, "_supervisors", []):
            await cancel_and_wait(task)
        if self.cluster is not None:  # after the workers: it published their usage while they drained; then leaves
            await self.cluster.stop()
        await self.ops.close()
        for sock in self._held:
            sock.close()


def _describe(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"code {code}"
