"""Cluster-wide budgets (issue 26): three sidecar proxies in front of three brokers, one tenant through all three.

Three Tansu brokers on this machine, each a one-broker cluster with its own in-memory storage (Tansu cannot share a
memory engine between brokers), each advertising its sidecar's port. Three sidecar proxies, each its own process
(``python -m bench.cluster_budget sidecar``: the proxy's ``ProxyApp``, as ``kafka-quota-proxy run`` starts it),
proxy i in front of broker i. Under ``quota.scope: cluster`` they share one usage topic: it lives on broker 1 and
sidecars 2 and 3 reach it there (``ProxyApp.usage_kafka``), since their own one-broker clusters are not broker 1's;
in a real cluster every sidecar reaches the same topic through its own broker. Sidecars 2 and 3 reach it through
sidecar 1 (broker 1 advertises it), as the sidecars of a real cluster reach the topic's leader through its
sidecar, which lets them write it as ``admin_principals`` (here ``User:ANONYMOUS``: plaintext, no SASL). Sync
settings are the documented defaults (``quota.cluster.sync.ms`` 1000, ``quota.cluster.stale.ms`` 10000; windows
11 x 1 s).

One tenant (client id ``shared``, ``producer_byte_rate`` ``--rate``) produces flat out with confluent-kafka at its
default settings (a Producer per sidecar, keyless 1000-byte messages over 6 partitions, the local queue kept full),
through all three at once. Admitted = what the producers had acknowledged, per second (delivery reports). Phases:

1. steady: all three flat out, ``--warm`` s, then ``--measure`` s: total / quota (target 0.9-1.1 under ``cluster``,
   about 3 under ``broker``, which runs the same phase on a fresh set);
2. shift: the tenant stops producing to sidecars 2 and 3 (their queues purged) and goes on through sidecar 1: when
   sidecar 1 is at the quota (a 3 s average within 0.9-1.1: one second of a stop-and-go burst is not it), and its
   mean from then to 15 s after the shift (target: within 5 s); also the first second of 0.9 x or more (seconds
   are counted from the first whole second after the event);
3. SIGKILL: all three flat out again, then sidecar 3 is killed (no tombstone) and its producer stops: the first
   second from which sidecars 1 and 2 are at the quota in total (a 3 s average within 0.9-1.1), and their mean from
   then to the end (target: within ``quota.cluster.stale.ms``); when sidecar 1 stopped counting sidecar 3 as fresh;
4. SIGTERM: sidecar 3 started again (same id), all three flat out, then sidecar 3 stopped with SIGTERM (it
   deletes its key: a tombstone): the same figures.

Each phase with ``quota.smoothing`` on (the default with a usage topic) and off (Kafka's sampled rate), each on a
fresh set of brokers and sidecars.

Usage: ``PYTHONPATH=. python -m bench.cluster_budget [--rate 2000000] [--warm 25] [--measure 30] [--smoothing on,off]
[--scopes cluster,broker]`` (about 12 minutes)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, free_port, stop_processes, tansu, wait_for_port  # noqa: E402
from tests.integration.clients import ck_flat_out  # noqa: E402

CLIENT_ID = "shared"
TOPIC = "tenant"
PARTITIONS = 6
USAGE_TOPIC = "__kafka_quota_proxy_usage"
VALUE = b"v" * 1000
SYNC_MS, STALE_MS = 1000, 10000  # the documented defaults


# -- one sidecar process ----------------------------------------------------------------------------------------------


def run_sidecar(config_path: str, usage_bootstrap: str) -> int:
    """One sidecar: the proxy as ``kafka-quota-proxy run`` starts it, its usage topic on ``usage_bootstrap``."""
    from config.loader import parse_config
    from config.model import Address
    from proxy.app import ProxyApp
    from proxy.cli.main import run_event_loop
    from proxy.cluster.kafka_clients import OwnKafka
    from proxy.ground.logs import install_bounded_lines

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    install_bounded_lines()
    with open(config_path) as f:
        config = parse_config(json.load(f))
    app = ProxyApp(config)
    host, port = usage_bootstrap.rsplit(":", 1)
    if (host, int(port)) != (config.upstream.bootstrap_servers[0].host, config.upstream.bootstrap_servers[0].port):
        app.usage_kafka = OwnKafka((Address(host, int(port)),))
    run_event_loop(app.run_until_signal())
    return 0


class Sidecar:
    """Sidecar i: its broker, its proxy process, its metrics."""

    def __init__(self, index: int, scope: str, rate: int, workdir: str, smoothing: str) -> None:
        self.index = index
        self.scope = scope
        self.smoothing = smoothing
        self.rate = rate
        self.workdir = workdir
        self.port, self.broker_port, self.metrics_port = free_port(), free_port(), free_port()
        self.broker = tansu(self.broker_port, self.port)
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, usage_bootstrap: str) -> None:
        settings = {"quota.scope": self.scope, "quota.smoothing": self.smoothing, "shutdown.grace.period.ms": 1000}
        if self.scope == "cluster":
            settings.update(
                {
                    "quota.cluster.topic": USAGE_TOPIC,
                    "quota.cluster.id": f"sidecar-{self.index}",
                    "quota.cluster.sync.ms": SYNC_MS,
                    "quota.cluster.stale.ms": STALE_MS,
                }
            )
        config = {
            "upstream": {"bootstrap_servers": [f"127.0.0.1:{self.broker_port}"]},
            "listeners": [{"name": "PLAINTEXT", "bind": self.bootstrap}],
            "metrics": {"bind": f"127.0.0.1:{self.metrics_port}"},
            "quotas": [{"entity": {"client-id": CLIENT_ID}, "producer_byte_rate": self.rate}],
            "admin_principals": ["User:ANONYMOUS"],  # the other sidecars' clients (plaintext: anonymous)
            "settings": settings,
        }
        path = os.path.join(self.workdir, f"sidecar-{self.index}.json")
        with open(path, "w") as f:
            json.dump(config, f)
        log = open(os.path.join(self.workdir, f"sidecar-{self.index}.log"), "a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.cluster_budget", "sidecar", path, usage_bootstrap],
            cwd=ROOT,
            stdout=log,
            stderr=log,
        )
        log.close()
        wait_for_port(self.port)

    def metric(self, name: str, **labels) -> float | None:
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2).read().decode()
        except OSError:
            return None
        want = [f'{k}="{v}"' for k, v in labels.items()]
        for line in text.splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                if all(w in line for w in want):
                    return float(line.rsplit(" ", 1)[1])
        return None

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


# -- the tenant -------------------------------------------------------------------------------------------------------


class Producer(threading.Thread):
    """One confluent-kafka producer of the tenant, default settings, flat out through one sidecar until stopped;
    acknowledged bytes per second since ``t0``."""

    def __init__(self, bootstrap: str, t0: float, acked: Counter) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.t0, self.acked = bootstrap, t0, acked
        self.halt = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Producer as CkProducer

        def done(err, msg) -> None:
            if err is None:
                self.acked[int(time.monotonic() - self.t0)] += len(msg)

        p = CkProducer({"bootstrap.servers": self.bootstrap, "client.id": CLIENT_ID})
        ck_flat_out(p, TOPIC, VALUE, self.halt, done)  # at the halt nothing queued is sent any more


def create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "bench-admin"})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)


# -- the run ----------------------------------------------------------------------------------------------------------


class Run:
    def __init__(self, scope: str, rate: int, smoothing: str) -> None:
        self.scope, self.rate = scope, rate
        self.workdir = tempfile.mkdtemp(prefix=f"cluster_budget-{scope}-smoothing-{smoothing}-")
        self.sidecars = [Sidecar(i, scope, rate, self.workdir, smoothing) for i in (1, 2, 3)]
        self.usage_bootstrap = f"127.0.0.1:{self.sidecars[0].broker_port}"
        self.t0 = time.monotonic()
        self.acked = [Counter() for _ in self.sidecars]
        self.producers: list[Producer | None] = [None, None, None]
        self.fresh_seen: list[tuple[float, float | None]] = []  # sidecar 1's fresh peers, (time, value)
        self._watching = threading.Event()

    def __enter__(self) -> Run:
        try:
            for s in self.sidecars:
                s.start(self.usage_bootstrap)
            for s in self.sidecars:
                create_topic(s.bootstrap)
        except BaseException:
            self.__exit__()
            raise
        self.t0 = time.monotonic()
        if self.scope == "cluster":
            threading.Thread(target=self._watch, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._watching.set()
        self.stop_producers(0, 1, 2)
        for s in self.sidecars:
            s.stop()
        stop_processes([s.broker for s in self.sidecars])
        print(f"  (sidecar logs in {self.workdir})")

    def now(self) -> float:
        return time.monotonic() - self.t0

    def _watch(self) -> None:
        while not self._watching.wait(0.25):
            self.fresh_seen.append(
                (self.now(), self.sidecars[0].metric("kafka_quota_proxy_cluster_usage_peers", state="fresh"))
            )

    def start_producer(self, i: int) -> None:
        self.producers[i] = Producer(self.sidecars[i].bootstrap, self.t0, self.acked[i])
        self.producers[i].start()

    def stop_producers(self, *indices: int) -> None:
        stopping = [p for p in (self.producers[i] for i in indices) if p is not None]
        for i in indices:
            self.producers[i] = None
        for producer in stopping:
            producer.halt.set()
        for producer in stopping:
            producer.join(15)

    def per_second(self, which, start: float, end: float) -> list[float]:
        """Acknowledged bytes of the sidecars ``which`` in each whole second of [start, end), as x quota."""
        return [sum(self.acked[i][s] for i in which) / self.rate for s in range(int(start), int(end))]

    def mean(self, which, start: float, end: float) -> float:
        seconds = self.per_second(which, start, end)
        return sum(seconds) / len(seconds) if seconds else 0.0

    def sleep_until(self, t: float) -> None:
        time.sleep(max(0.0, t - self.now()))


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def steady(run: Run, warm: float, measure: float) -> tuple[float, str]:
    start = run.now() + warm
    run.sleep_until(start + measure + 1)
    total = run.mean((0, 1, 2), start, start + measure)
    shares = " ".join(f"{run.mean((i,), start, start + measure):.2f}" for i in range(3))
    return total, shares


def converge(run: Run, which, since: float, until: float) -> tuple[float | None, float]:
    """The first whole second after ``since`` (1: the first) from which the sidecars ``which`` had 0.9-1.1 x the
    quota on average over 3 s (None: never), and their mean from then to ``until``."""
    seconds = run.per_second(which, since, until)
    for k in range(len(seconds) - 2):
        if 0.9 <= sum(seconds[k : k + 3]) / 3 <= 1.1:
            return float(k + 1), sum(seconds[k:]) / len(seconds[k:])
    return None, sum(seconds) / max(1, len(seconds))


def stopped_phase(run: Run, sig: int, name: str, settle: float, observe: float) -> None:
    run.sleep_until(run.now() + settle)
    before = run.mean((0, 1, 2), run.now() - 10, run.now() - 1)
    at = run.now()
    run.sidecars[2].stop(sig)
    run.stop_producers(2)
    run.sleep_until(at + observe + 1)
    took, after = converge(run, (0, 1), int(at) + 1, at + observe)
    stale_at = next((t - at for t, v in run.fresh_seen if t >= at and v is not None and v < 2), None)
    seconds = " ".join(f"{x:.2f}" for x in run.per_second((0, 1), int(at) + 1, at + observe))
    print(f"  {name}: before, all three: {before:.2f} x; after, sidecars 1+2 per second: {seconds}")
    print(
        f"  {name}: sidecars 1+2 within 0.9-1.1 x (3 s average) from second {took if took is None else f'{took:.0f}'} "
        f"after the stop, then {after:.2f} x on average (target: within stale.ms {STALE_MS / 1000:.0f} s): "
        f"{verdict(took is not None and took <= STALE_MS / 1000 and 0.9 <= after <= 1.1)}; sidecar 1 counted "
        f"sidecar 3 out after {'never' if stale_at is None else f'{stale_at:.1f} s'}"
    )


def cluster_run(rate: int, warm: float, measure: float, smoothing: str) -> None:
    with Run("cluster", rate, smoothing) as run:
        for i in range(3):
            run.start_producer(i)
        total, shares = steady(run, warm, measure)
        print(f"  start: all three, per second: {' '.join(f'{x:.2f}' for x in run.per_second((0, 1, 2), 0, 12))}")
        print(
            f"  steady, quota.scope cluster: {total:.2f} x producer_byte_rate in total over {measure:.0f} s "
            f"(target 0.9-1.1): {verdict(0.9 <= total <= 1.1)}; per sidecar {shares}"
        )
        shift = run.now()
        run.stop_producers(1, 2)
        run.sleep_until(shift + 16)
        seconds = run.per_second((0,), int(shift) + 1, shift + 15)
        first = next((k + 1 for k, x in enumerate(seconds) if x >= 0.9), None)
        took, after = converge(run, (0,), int(shift) + 1, shift + 15)
        print(f"  shift to sidecar 1: per second after the shift {' '.join(f'{x:.2f}' for x in seconds)}")
        print(
            f"  shift to sidecar 1: within 0.9-1.1 x (3 s average) from second {took if took is None else f'{took:.0f}'} "
            f"after the shift, then {after:.2f} x on average (target: 0.9 x within 5 s): "
            f"{verdict(took is not None and took <= 5 and 0.9 <= after <= 1.1)}; a second of 0.9 x or more first "
            f"in second {first}"
        )
        for i in (1, 2):
            run.start_producer(i)
        stopped_phase(run, signal.SIGKILL, "sidecar 3 SIGKILLed", 20, 25)
        run.sidecars[2].start(run.usage_bootstrap)
        run.start_producer(2)
        stopped_phase(run, signal.SIGTERM, "sidecar 3 SIGTERMed (tombstone)", 20, 15)


def broker_run(rate: int, warm: float, measure: float, smoothing: str) -> None:
    with Run("broker", rate, smoothing) as run:
        for i in range(3):
            run.start_producer(i)
        total, shares = steady(run, warm, measure)
        print(
            f"  steady, quota.scope broker: {total:.2f} x producer_byte_rate in total over {measure:.0f} s "
            f"(target about 3): {verdict(2.7 <= total <= 3.3)}; per sidecar {shares}"
        )


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "sidecar":
        return run_sidecar(sys.argv[2], sys.argv[3])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=2_000_000, help="producer_byte_rate, bytes/s")
    parser.add_argument("--warm", type=float, default=25.0)
    parser.add_argument("--measure", type=float, default=30.0)
    parser.add_argument("--scopes", default="cluster,broker")
    parser.add_argument("--smoothing", default="on,off", help="quota.smoothing values to run each scope with")
    args = parser.parse_args()
    print(
        f"three sidecars, one tenant at producer_byte_rate {args.rate} B/s, sync.ms {SYNC_MS}, stale.ms {STALE_MS}, "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    )
    for smoothing in args.smoothing.split(","):
        for scope in args.scopes.split(","):
            print(f"quota.scope {scope}, quota.smoothing {smoothing}:")
            (cluster_run if scope == "cluster" else broker_run)(args.rate, args.warm, args.measure, smoothing)
    return 0


if __name__ == "__main__":
    sys.exit(main())
