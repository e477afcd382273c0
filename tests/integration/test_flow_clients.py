"""Real clients under byte-rate quotas through the proxy (against Tansu) are throttled,
never stalled, and get their quota.

Each client runs flat out with 1 KiB messages in its own process, with its default settings, and confluent-kafka
also with pipelining settings (``batch.size`` 16384, ``queue.buffering.max.kbytes`` 1024, ``linger.ms`` 5, acks=1:
tens of requests in flight, cut anywhere into socket reads); kafka-python and aiokafka pipeline with their
defaults. Consumers use their defaults (``fetch.max.bytes`` 50 MiB) on a pre-filled topic of four partitions,
assigned by hand. Every client has its own quota entity; the clients of one case run at once; the proxy runs in
its own process, as deployed.

Before the flow rewrite (the ``Flow:`` commit) a throttled request whose frame spanned two socket reads was never
read whole, and its client got no answer: run against the commit before it, both confluent-kafka producers here
got no acknowledgement for the whole 28 s measured (rate 0), and the 1 MB-request producers none for 32-36 s.

What is asserted, after the start-up burst (a fresh quota admits about ``quota * (num - 1)`` windows at once, as
Kafka's does; the measurement starts one window span plus 1 s after every client got its first answer):

- no gap between consecutive acknowledgements (delivery reports, futures) or received records, timed in the
  client, longer than ``quota.mute.max.ms`` + 1 s. ``quota.mute.max.ms`` is set to the window span here (its
  default, 25 s, would make the bound weak); quotas are sized so no request needs that long (``size / quota``
  well under the span), so the cap never shortens a throttle;
- the rate the quota counts (``quota_bytes_total``, scraped every 0.1 s) within RATE_BOUNDS of the quota, over at
  least 34 windows, averaged over where the interval starts within one or two window spans (``phase_averaged_rate``).

A request large compared with ``quota * window`` (1 MB at 256 KiB/s under 3 x 1 s windows) needs a throttle longer
than the window span, so its sample expires before the throttle is paid: against Kafka such a client gets about
1.15-1.36 x its quota. The proxy, with the default ``quota.mute.max.ms``, must not do worse: at most LARGE_BOUND.

kafka-python 3.0.12's producer keeps a core busy while it is throttled: its sender finds the paused connection not
ready with no connection delay, and polls with a zero timeout until the throttle ends. It does so against Kafka's
own quota as much as through the proxy (default settings, 1 KiB records, 256 KiB/s, 20 s measured, same node of
Kafka 4.4: directly under Kafka's producer_byte_rate 11.9 CPU-s, 145,000 zero-timeout polls, 67 throttled answers,
16.1 s of throttle; through the proxy 13.1 CPU-s, 198,000 polls, 41 answers, 15.7 s). That CPU is the client's, at
its defaults, which is what these tests measure.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import pytest
import yaml

from tests.harness import Tansu, free_port, proxy_config, wait_for_port
from tests.integration.clients import ck_create_topic

pytestmark = [pytest.mark.integration, pytest.mark.measures_rate(group="flow")]

KIB = 1024
VALUE = b"v" * 1024
PARTITIONS = 4
RATE_BOUNDS = (0.9, 1.05)
LARGE_BOUND = 1.4
SCRAPE_S = 0.1
COUNTER = "kafka_quota_proxy_quota_bytes_total"
PRODUCE, FETCH = "producer_byte_rate", "consumer_byte_rate"
# What a kafka-python producer run flat out holds unacknowledged: twice what its connection carries in flight (5
# requests, each a batch for every partition), so it always has full requests ready to send. kafka-python 3 has no
# buffer.memory bound: unbounded, the loop queued without end (the client's memory past 1 GB in 50 s). Its CPU is the
# same either way: while throttled, its network thread polls without waiting (about one core, kafka-python's own).
IN_FLIGHT = 5  # kafka-python's max_in_flight_requests_per_connection default
PIPELINING = {"batch.size": 16384, "queue.buffering.max.kbytes": 1024, "linger.ms": 5, "acks": 1}


# -- clients ---------------------------------------------------------------------------------------------------


class Recorder:
    """What a client runner sees, in the client's own process: its name and topic, a stop flag, and ``record``
    for each acknowledgement (or record) it gets."""

    def __init__(self, name: str, topic: str, stop, acknowledged) -> None:
        self.name, self.topic, self.stop, self._acknowledged = name, topic, stop, acknowledged
        self.times: list[float] = []
        self.late: list[tuple[float, float]] = []  # (when, seconds): the client's own throttle timer fired late

    def record(self, *_args) -> None:
        self.times.append(time.monotonic())  # CLOCK_MONOTONIC: one clock for every process of the machine
        if len(self.times) == 1:
            self._acknowledged.set()


def client_process(name: str, topic: str, bootstrap: str, stop, acknowledged, out_path: str) -> None:
    """A client's process: runs it flat out until ``stop``, then writes its timestamps (and error) as JSON."""
    recorder = Recorder(name, topic, stop, acknowledged)
    error = None
    try:
        RUNNERS[name][1](recorder, bootstrap)
    except BaseException as exc:  # reported by the test
        error = repr(exc)
    with open(out_path, "w") as f:
        json.dump({"times": recorder.times, "late": recorder.late, "error": error}, f)
    os._exit(0)  # the measurement is over: no waiting for client threads, nor their finalizers, at exit


class Client:
    """One client run flat out in its own process, as users run them (Python clients in one process would share
    an interpreter lock, and measure each other); remembers when each acknowledgement (or record) arrived."""

    def __init__(self, name: str, limit: int, topic: str, bootstrap: str, workdir: str) -> None:
        self.name, self.quota, self.limit, self.topic = name, RUNNERS[name][0], limit, topic
        context = multiprocessing.get_context("spawn")
        self.stop, self.acknowledged = context.Event(), context.Event()
        self._out = os.path.join(workdir, f"{name}.json")
        self.process = context.Process(
            target=client_process,
            name=name,
            daemon=True,
            args=(name, topic, bootstrap, self.stop, self.acknowledged, self._out),
        )
        self.times: list[float] = []
        self.late: list[tuple[float, float]] = []
        self.error: str | None = None

    def join(self, timeout: float) -> None:
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
            self.error = f"did not stop within {timeout} s"
            return
        try:
            with open(self._out) as f:
                result = json.load(f)
        except (OSError, ValueError) as exc:
            self.error = f"exit code {self.process.exitcode}, no result: {exc!r}"
            return
        self.times, self.late, self.error = result["times"], result["late"], result["error"]


def ck_producer(extra: dict):
    def run(client: Recorder, bootstrap: str) -> None:
        from confluent_kafka import Producer

        def delivered(err, _msg) -> None:
            if err is None:
                client.record()

        p = Producer({"bootstrap.servers": bootstrap, "client.id": client.name, **extra})
        while not client.stop.is_set():
            try:
                p.produce(client.topic, VALUE, on_delivery=delivered)
            except BufferError:
                p.poll(0.005)  # queue full: serve delivery reports, then offer more at once
                continue
            p.poll(0)
        p.purge()
        p.flush(5)

    return run


def watch_throttle_timer(client: Recorder) -> None:
    """kafka-python 3 pauses a connection for a response's throttle_time_ms (KIP-219) and resumes it from a timer
    of its own network thread; on a busy machine that timer fires late (measured: up to 0.36 s, 7 % of the time
    alone, more with other clients on the two cores), time in which the client could send and does not. Each
    late resumption is recorded, so the test can tell the quota's accuracy from the client's own delay."""
    from kafka.net.connection import KafkaConnection

    resume = KafkaConnection._maybe_unthrottle

    def timed(self) -> None:
        due = self._throttle_time
        resume(self)
        if due and not self._throttle_time:  # resumed now: how long after it was due
            now = time.monotonic()
            client.late.append((now, now - due))

    KafkaConnection._maybe_unthrottle = timed


def kp_producer(extra: dict):
    def run(client: Recorder, bootstrap: str) -> None:
        from kafka import KafkaProducer
        from kafka.errors import KafkaTimeoutError

        watch_throttle_timer(client)
        p = KafkaProducer(bootstrap_servers=bootstrap, client_id=client.name, **extra)
        backlog = 2 * IN_FLIGHT * PARTITIONS * extra.get("batch_size", 16384) // len(VALUE)
        sent = 0
        while not client.stop.is_set():
            if sent - len(client.times) >= backlog:
                time.sleep(0.005)
                continue
            p.send(client.topic, VALUE).add_callback(client.record)
            sent += 1
        try:
            p.close(timeout=1)  # what is still buffered is dropped: the measurement is over
        except KafkaTimeoutError:
            pass

    return run


def aio_producer(extra: dict):
    def run(client: Recorder, bootstrap: str) -> None:
        from aiokafka import AIOKafkaProducer

        async def main() -> None:
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id=client.name, **extra)
            await p.start()
            try:
                while not client.stop.is_set():
                    (await p.send(client.topic, VALUE)).add_done_callback(client.record)
            finally:
                await asyncio.wait_for(p.stop(), 30)

        asyncio.run(main())

    return run


def ck_consumer(extra: dict):
    def run(client: Recorder, bootstrap: str) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": client.name,
                "group.id": client.name,
                "enable.auto.commit": False,
                **extra,
            }
        )
        c.assign([TopicPartition(client.topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        try:
            while not client.stop.is_set():
                for message in c.consume(500, 0.2):
                    if message.error() is None:
                        client.record()
        finally:
            c.close()

    return run


def kp_consumer(extra: dict):
    def run(client: Recorder, bootstrap: str) -> None:
        from kafka import KafkaConsumer, TopicPartition

        c = KafkaConsumer(bootstrap_servers=bootstrap, client_id=client.name, enable_auto_commit=False, **extra)
        try:
            partitions = [TopicPartition(client.topic, p) for p in range(PARTITIONS)]
            c.assign(partitions)
            c.seek_to_beginning(*partitions)
            while not client.stop.is_set():
                for records in c.poll(timeout_ms=200).values():
                    for _ in records:
                        client.record()
        finally:
            c.close()

    return run


def aio_consumer(extra: dict):
    def run(client: Recorder, bootstrap: str) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def main() -> None:
            c = AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id=client.name, enable_auto_commit=False, **extra)
            await c.start()
            try:
                partitions = [TopicPartition(client.topic, p) for p in range(PARTITIONS)]
                c.assign(partitions)
                await c.seek_to_beginning(*partitions)
                while not client.stop.is_set():
                    for records in (await c.getmany(timeout_ms=200)).values():
                        for _ in records:
                            client.record()
            finally:
                await c.stop()

        asyncio.run(main())

    return run


# name -> (quota key, runner); every client's client.id is its name, and its quota entity.
RUNNERS = {
    "ck-producer-default": (PRODUCE, ck_producer({})),
    "ck-producer-pipelining": (PRODUCE, ck_producer(PIPELINING)),
    "kp-producer-default": (PRODUCE, kp_producer({})),
    "aio-producer-default": (PRODUCE, aio_producer({})),
    "ck-consumer-default": (FETCH, ck_consumer({})),
    "kp-consumer-default": (FETCH, kp_consumer({})),
    "aio-consumer-default": (FETCH, aio_consumer({})),
    # 1 MB requests: librdkafka's defaults already allow them (batch.size and message.max.bytes 1000000);
    # kafka-python's must be raised from 16 KiB batches
    "ck-producer-1mb": (PRODUCE, ck_producer({})),
    "kp-producer-1mb": (PRODUCE, kp_producer({"batch_size": 1000000, "max_request_size": 1048576})),
}


# -- the proxy, in its own process, and its quota counters -----------------------------------------------------


class ProxyProcess:
    """The proxy as deployed, in its own process (the Python clients here must not share its interpreter lock),
    with a thread that scrapes every entity's ``quota_bytes_total`` every SCRAPE_S."""

    def __init__(self, config: dict) -> None:
        self.metrics_port = free_port()
        config["metrics"] = {"bind": f"127.0.0.1:{self.metrics_port}"}
        self.port = int(config["listeners"][0]["bind"].rsplit(":", 1)[1])
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            yaml.safe_dump(config, f)
        self.config_path = f.name
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "proxy.cli", "run", "--config", f.name, "--log-level", "WARNING"], cwd=root
        )
        self.series: dict[tuple[str, str], list[tuple[float, float]]] = {}
        self._stop = threading.Event()
        self._scraper = threading.Thread(target=self._scrape_loop, name="scraper", daemon=True)
        try:
            wait_for_port(self.port, timeout=30)
            wait_for_port(self.metrics_port, timeout=30)
        except TimeoutError:
            self.stop()
            raise
        self._scraper.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def metrics_text(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as response:
            return response.read().decode()

    def quota_samples(self, prefix: str) -> dict[tuple[str, str], float]:
        """``{(quota, client_id): value}`` of every sample named ``prefix`` (labels quota, user, client_id)."""
        out = {}
        for line in self.metrics_text().splitlines():
            if line.startswith(prefix + "{"):
                labels, value = line[len(prefix) + 1 :].rsplit("} ", 1)
                fields = dict(part.split("=", 1) for part in labels.split(","))
                out[(fields["quota"].strip('"'), fields["client_id"].strip('"'))] = float(value)
        return out

    def _scrape_loop(self) -> None:
        while not self._stop.wait(SCRAPE_S):
            try:
                counted = self.quota_samples(COUNTER)
            except OSError:
                continue
            now = time.monotonic()
            for key, value in counted.items():
                self.series.setdefault(key, []).append((now, value))

    def stop(self) -> None:
        self._stop.set()
        if self._scraper.is_alive():
            self._scraper.join(5)
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        os.unlink(self.config_path)


def phase_averaged_rate(series: list[tuple[float, float]], t0: float, t1: float, phase_s: float) -> float:
    """Bytes/s over intervals of ``t1 - t0 - phase_s`` seconds, averaged over every start (scrape) within the
    first ``phase_s`` seconds from ``t0``.

    A quota's sampled rate makes a throttled client's traffic cycle, against Kafka too: a request is counted
    whole when it arrives (a 1 MB request is 4% of 24 s at 1 MiB/s), and a client that keeps up with its
    throttles bursts about ``quota * (num - 1)`` windows each time its oldest sample expires, then waits, about
    every window span or a little more (3.1-3.3 s with 3 windows, 11.1-11.6 s with 11, 12.4-14.8 s for 1 MB
    requests at 1 MiB/s with 11, measured here). One interval is off by up to one such burst depending on where
    it starts; the mean over starts spread across one cycle is not (the mean of a periodic function over one
    period is its mean), and where the period is longer than ``phase_s`` it is off by a fraction of a burst."""
    times = [t for t, _ in series]
    length = t1 - t0 - phase_s
    starts = [t for t in times if t0 <= t <= t0 + phase_s]
    if not starts:
        return 0.0
    return sum(value_at(series, t + length, times) - value_at(series, t, times) for t in starts) / len(starts) / length


def value_at(series: list[tuple[float, float]], t: float, times: list[float] | None = None) -> float:
    """The counter at the last scrape at or before ``t`` (``times``: the scrape times, if already at hand)."""
    i = bisect.bisect_right(times if times is not None else [s for s, _ in series], t) - 1
    return series[i][1] if i >= 0 else 0.0


def max_gap(times: list[float], since: float, until: float) -> float:
    """Longest time without an event in [since, until], counting the gap that spans ``since`` and the one
    before ``until`` (a client that stops for good shows a gap as long as the rest of the run)."""
    before = [t for t in times if t < since][-1:]
    inside = [t for t in times if since <= t <= until]
    points = before + inside + [until]
    if not inside:
        return until - (before[0] if before else since)
    return max(b - a for a, b in zip(points, points[1:]))


# -- one scenario ----------------------------------------------------------------------------------------------


def prefill(broker_bootstrap: str, topic: str, megabytes: int) -> None:
    """Write the consumers' topic straight to the broker (no quota) in 64 KiB batches (a consumer receives at
    least one whole batch per fetch: batches small compared with quota x window)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker_bootstrap, "linger.ms": 20, "acks": 1, "batch.size": 65536})
    for i in range(megabytes * 1024):
        while True:
            try:
                p.produce(topic, VALUE, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0


def run_scenario(
    window_num: int, limits: dict[str, int], measure_s: float, mute_max_ms: int | None, phase_s: float | None = None
) -> dict:
    """Runs the named clients at once, each under its own quota; returns, per client, what it got after the
    start-up burst: rate / quota (as the quota counted it, and the payload the client saw acknowledged), the
    longest gap, and the quota's throttle counters."""
    span_s = window_num  # 1 s windows
    phase_s = span_s if phase_s is None else phase_s
    settings = {"quota.window.num": window_num, "quota.window.size.seconds": 1}
    if mute_max_ms is not None:
        settings["quota.mute.max.ms"] = mute_max_ms
    quotas = [{"entity": {"client-id": name}, RUNNERS[name][0]: limit} for name, limit in limits.items()]
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    try:
        proxy = ProxyProcess(proxy_config(proxy_port, broker_port, quotas=quotas, **settings))
    except BaseException:
        broker.stop()
        raise
    clients: list[Client] = []
    workdir = tempfile.TemporaryDirectory()
    try:
        direct = f"127.0.0.1:{broker_port}"
        for name, limit in limits.items():
            quota = RUNNERS[name][0]
            topic = f"flow-{name}"
            ck_create_topic(direct, topic, PARTITIONS)
            if quota == FETCH:
                # the burst, the measurement and 10 s to spare, all at the quota
                prefill(direct, topic, megabytes=-(-limit * (span_s + 1 + span_s + measure_s + 10) // 2**20))
            clients.append(Client(name, limit, topic, proxy.bootstrap, workdir.name))
        for client in clients:
            client.process.start()
        for client in clients:  # each in its own process: start-up (imports, metadata) takes a while
            assert client.acknowledged.wait(60), f"{client.name}: no acknowledgement or record in 60 s"
        started = time.monotonic()
        steady_from = started + span_s + 1
        end = steady_from + measure_s
        time.sleep(end - time.monotonic())  # deliberate: the measurement window (a rate group)
        counted = proxy.quota_samples(COUNTER)
        throttled = proxy.quota_samples("kafka_quota_proxy_quota_throttled_responses_total")
        throttle_s = proxy.quota_samples("kafka_quota_proxy_quota_throttle_time_seconds_total")
        for client in clients:
            client.stop.set()
        for client in clients:
            client.join(60)
        report = {}
        for client in clients:
            key = (client.quota, client.name)
            series = proxy.series.get(key, [])
            rate = phase_averaged_rate(series, steady_from, end, phase_s)
            acked = sum(1 for t in client.times if steady_from <= t <= end)
            late_s = sum(s for t, s in client.late if steady_from <= t <= end)
            report[client.name] = {
                "rate": round(rate / client.limit, 3),  # what is asserted, at most the upper bound
                # ... and at least the lower bound over the time the client was ready to send (watch_throttle_timer)
                "rate_when_ready": round(rate / client.limit * measure_s / (measure_s - late_s), 3),
                "client_late_s": round(late_s, 2),
                "ends_rate": round(
                    (value_at(series, end) - value_at(series, steady_from)) / measure_s / client.limit, 3
                ),
                "client_rate": round(acked * len(VALUE) / measure_s / client.limit, 3),  # payload, as acked
                "max_gap_s": round(max_gap(client.times, steady_from, end), 2),
                "events": len(client.times),
                "throttled": int(throttled.get(key, 0)),
                "throttle_avg_ms": round(1000 * throttle_s.get(key, 0) / max(1, throttled.get(key, 0))),
                "counted_mb": round(counted.get(key, 0) / 1e6, 1),
                "error": client.error,
            }
        if os.environ.get("FLOW_CLIENTS_DUMP"):  # the raw timelines, for a closer look at a failure
            with open(os.environ["FLOW_CLIENTS_DUMP"], "a") as f:
                f.write(
                    json.dumps(
                        {
                            "window_num": window_num,
                            "start": started,
                            "steady_from": steady_from,
                            "end": end,
                            "report": report,
                            "series": {c.name: proxy.series.get((c.quota, c.name), []) for c in clients},
                            "times": {c.name: c.times for c in clients},
                        }
                    )
                    + "\n"
                )
        return report
    finally:
        for client in clients:
            client.stop.set()
        for client in clients:
            if client.process.is_alive():
                client.join(30)
        proxy.stop()
        broker.stop()
        workdir.cleanup()


def check(report: dict, mute_max_ms: int, bounds: tuple[float, float]) -> None:
    for name, r in report.items():
        assert r["error"] is None, f"{name}: {r['error']}\n{report}"
        assert r["max_gap_s"] <= mute_max_ms / 1000 + 1, f"{name} stalled for {r['max_gap_s']} s:\n{report}"
        assert r["rate"] <= bounds[1], f"{name} at {r['rate']} x quota:\n{report}"
        assert bounds[0] <= r["rate_when_ready"], f"{name} at {r['rate_when_ready']} x quota when ready:\n{report}"


PRODUCERS = ["ck-producer-default", "ck-producer-pipelining", "kp-producer-default", "aio-producer-default"]
CONSUMERS = ["ck-consumer-default", "kp-consumer-default", "aio-consumer-default"]
# 512 KiB/s: many throttles a second for 16 KiB requests and 64 KiB fetched batches, and Kafka's cycles (a burst of
# about (num - 1) windows' quota in a second) stay within what each client can send. confluent-kafka's default
# requests are 1 MB: at 512 KiB/s each would need 2 s, two thirds of a 3 s window span, the regime of the
# large-request test (a request's sample expires before its throttle is paid); at 1 MiB/s it needs 1 s.
# kafka-python's and aiokafka's producers with their defaults (linger 0) are latency-bound: alone through the proxy
# they send about 1.4 MiB/s, and with three other clients, the broker and the proxy on two cores about 0.6 MiB/s,
# so at 512 KiB/s their own speed, not the quota, set their rate (0.89 x measured). At 256 KiB/s the quota is the
# limit, which is what the test measures.
PYTHON_PRODUCER_QUOTA = 256 * KIB
QUOTA = (
    {name: 512 * KIB for name in PRODUCERS + CONSUMERS}
    | {"ck-producer-default": 1024 * KIB}
    | {"kp-producer-default": PYTHON_PRODUCER_QUOTA, "aio-producer-default": PYTHON_PRODUCER_QUOTA}
)


# Clients measured together: the confluent-kafka producers, the Python producers, the consumers. Each group has the
# two cores to itself with the broker and the proxy; all seven at once left the Python producers short of CPU.
GROUPS = {
    "ck-producers": ["ck-producer-default", "ck-producer-pipelining"],
    "python-producers": ["kp-producer-default", "aio-producer-default"],
    "consumers": CONSUMERS,
}


@pytest.mark.timeout(150)
@pytest.mark.parametrize("group", list(GROUPS))
def test_three_windows_every_client_throttled_never_stalled_at_its_quota(group):
    """Every client, default and pipelining settings, under 3 x 1 s windows; rates over 34 windows (40 s), averaged
    over starts across two window spans (a client's burst cycle is one span or a little more; with one span and
    24 s, kafka-python's producer measured 0.85-0.97 x quota depending on where the interval started, 0.94-0.98
    with these). kafka-python 3 resumes a throttled connection from a timer that fires late on a busy machine
    (2.5-3.1 s late in 40 s measured here, 0.77-0.95 x quota in all): its lower bound is checked over the time it was
    ready to send (``rate_when_ready``, 0.95-1.01 x), its upper bound on the raw rate."""
    window_num = 3
    report = run_scenario(
        window_num,
        {name: QUOTA[name] for name in GROUPS[group]},
        measure_s=40,
        mute_max_ms=window_num * 1000,
        phase_s=2 * window_num,
    )
    print(f"window.num {window_num}: {report}")
    check(report, window_num * 1000, RATE_BOUNDS)


@pytest.mark.long_running(seconds=140)
@pytest.mark.timeout(180)
def test_default_eleven_windows_clients_throttled_never_stalled_at_their_quota():
    """Kafka's default 11 x 1 s windows, for the confluent-kafka producer (default and pipelining) and the
    kafka-python consumer; rates over 44 windows (a client bursts about every 11 to 15: the longer the
    measurement, the less where it starts within a cycle matters)."""
    window_num = 11
    names = ["ck-producer-default", "ck-producer-pipelining", "kp-consumer-default"]
    report = run_scenario(
        window_num, {name: QUOTA[name] for name in names}, measure_s=55, mute_max_ms=window_num * 1000
    )
    print(f"window.num {window_num}: {report}")
    check(report, window_num * 1000, RATE_BOUNDS)


@pytest.mark.long_running(seconds=110)
@pytest.mark.timeout(150)
@pytest.mark.measures_rate  # the other rate group: the two take about as long
def test_requests_large_compared_with_quota_times_window_not_worse_than_kafka():
    """1 MB requests at 256 KiB/s under 3 x 1 s windows, default quota.mute.max.ms (25 s): each request needs
    4 s, more than the 3 s window span, so the client gets more than its quota, against Kafka too (about
    1.15-1.36 x); the proxy must not let through more than LARGE_BOUND x."""
    names = ["ck-producer-1mb", "kp-producer-1mb"]
    # one request every 4 s or so: the rate is averaged over starts spread across two of them
    report = run_scenario(3, {name: 256 * KIB for name in names}, measure_s=32, mute_max_ms=None, phase_s=8)
    print(f"1 MB requests at 256 KiB/s, 3 x 1 s windows: {report}")
    check(report, 25000, (0.9, LARGE_BOUND))
