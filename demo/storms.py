"""``make demo``'s scenarios before the steady traffic, one quota each, every one judged from what its clients saw.

- The connection storm (:func:`connection_storm`): KIP-612's ``connection_creation_rate`` per IP.
- The topic-creation storm (:func:`topic_storm`): the controller mutation quota (KIP-599) rejecting creates over
  the quota. A kafka-python admin client (client-id ``demo-admin``, which speaks the strict CreateTopics versions)
  creates topics of STORM_PARTITIONS partitions one request after another for STORM_SECONDS, retrying at once
  whenever the client itself holds its requests for a ``throttle_time_ms`` it was given (a storm does not wait
  politely). Its quota is ``controller_mutation_rate`` R in the demo's config, with a burst B = R x
  controller.quota.window.num x size. The verdict: some creates were rejected with THROTTLING_QUOTA_EXCEEDED, and
  the partitions created stay within what the bucket allows, B + R x elapsed + one topic (a topic is admitted while
  tokens >= 0, so the last may overdraw).
- The producer-restart loop (:func:`producer_restarts`): KIP-936's ``producer_ids_rate``, new ids held in the proxy
  past the burst until the quota lets them through.
- A disk filling up (:func:`disk_fill`): cluster volume usage.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
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
    burst = rate * settings["controller.quota.window.num"] * settings["controller.quota.window.size.seconds"]
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


RESTARTER = "demo-restarter"
RESTARTS = 10
RESTART_TOPIC = "restarts"


@dataclass(frozen=True)
class RestartResult:
    held: tuple[bool, ...]  # per producer, in order: was its Produce held in the proxy (the held-requests counter)
    waited: tuple[float, ...]  # and seconds from its send to its acknowledgement
    acknowledged: int
    burst: int
    token_s: float  # seconds between two tokens of the bucket: W / producer_ids_rate
    elapsed: float  # seconds from the first producer's send to the last one's acknowledgement

    @property
    def allowed(self) -> float:
        """New ids the bucket lets through in ``elapsed``: its burst, one per token time, and the one then due."""
        return self.burst + self.elapsed / self.token_s + 1

    @property
    def outpaced(self) -> bool:
        """Whether the restarts came faster than the bucket refills: more ids than its burst and the tokens of the
        time they took, so that some must have waited. A machine busy enough to start each producer in about a
        token's time (0.6-0.8 s seen in a loaded make test) gives the bucket time to refill, and none need wait."""
        return len(self.held) > self.burst + self.elapsed / self.token_s

    @property
    def ok(self) -> bool:
        """Every message acknowledged; the burst passed unheld; some producer was held whenever the restarts
        outpaced the bucket; and no more ids went through than the bucket allows. How many were held depends on
        how fast the producers start, so the pattern past the burst is reported, not judged."""
        n = min(self.burst, len(self.held))
        return (
            self.acknowledged == len(self.held)
            and not any(self.held[:n])
            and (any(self.held) or not self.outpaced)
            and len(self.held) <= self.allowed
        )

    def text(self) -> str:
        marks = "".join("H" if h else "." for h in self.held)
        waits = [w for w, h in zip(self.waited, self.held) if h]
        held = (
            f"held ones acknowledged after {min(waits):.1f}-{max(waits):.1f} s"
            if waits
            else "none held"
            if self.outpaced
            else "none held: they came no faster than the tokens"
        )
        return (
            f"producer restarts ({RESTARTER}): {len(self.held)} idempotent producers, one after another, "
            f"each a new producer id: [{marks}] (H: held in the proxy before the broker saw its id); the first "
            f"{self.burst} pass at once, later ones wait for their token (one each {self.token_s:g} s; {held}); "
            f"{len(self.held)} ids in {self.elapsed:.1f} s, the bucket allows {self.allowed:.0f}; "
            f"{self.acknowledged}/{len(self.held)} messages acknowledged  {'OK' if self.ok else 'FAIL'}"
        )


def producer_restarts(
    bootstrap: str,
    config: ProxyConfig,
    report: Callable[[str], None],
    held_requests: Callable[[], float],
    restarts: int = RESTARTS,
) -> RestartResult:
    """A producer-restart loop (the KIP-936 use case): each kafka-python idempotent producer sends one message and
    closes; its Produce carries a new producer id. Past the bucket's burst each one is held in the proxy until the
    bucket has a token for its id (``producer.id.quota.enforcement: hold``): seen in the proxy's
    ``producer_ids_held_requests_total`` (``held_requests`` reads it) and in the time to its acknowledgement."""
    from kafka import KafkaProducer

    settings = config.settings
    limit = config.quotas.limit("producer_ids_rate", "ANONYMOUS", "")
    burst = int(limit * settings["producer.id.quota.window.num"])
    held, waited = [], []

    def start() -> KafkaProducer:
        return KafkaProducer(bootstrap_servers=bootstrap, client_id=RESTARTER, enable_idempotence=True, acks="all")

    # The next two producers start (bootstrap, metadata) while one sends, as a tight restart loop's would: on a busy
    # machine a start alone took about as long as the bucket takes to refill one token (0.6 s), and no id was held.
    with ThreadPoolExecutor(2) as pool:
        upcoming = [pool.submit(start) for _ in range(min(2, restarts))]
        try:
            for i in range(restarts):
                producer = upcoming.pop(0).result()
                if i + len(upcoming) + 1 < restarts:
                    upcoming.append(pool.submit(start))
                before = held_requests()
                try:
                    sent = time.monotonic()
                    producer.send(RESTART_TOPIC, f"restart {i}".encode()).get(30)
                    waited.append((sent, time.monotonic()))
                finally:
                    producer.close(5)
                held.append(held_requests() > before)
        finally:
            for rest in upcoming:  # none left unless a send failed
                rest.result().close(5)
    acknowledged = len(waited)
    began = waited[0][0] if waited else 0.0
    last_ack = waited[-1][1] if waited else 0.0
    waited = [done - sent for sent, done in waited]
    result = RestartResult(
        tuple(held),
        tuple(waited),
        acknowledged,
        burst,
        settings["producer.id.quota.window.size.seconds"] / limit,
        (last_ack - began) if acknowledged else 0.0,
    )
    report(result.text())
    return result


DISK_TOPIC = "disk-demo"
DISK_BROKER = 111  # Tansu's node id
DISK_PHASES = (
    ("below the soft limit", 30, "OPEN"),
    ("between soft and hard", 70, "THROTTLE"),
    ("past the hard limit", 95, "PAUSE"),
    ("space freed", 20, "OPEN"),
)
DISK_PHASE_SECONDS = 4


@dataclass(frozen=True)
class DiskResult:
    phases: tuple[tuple[str, str, float], ...]  # (what, state the proxy reported, MiB/s acknowledged)
    acknowledged: int
    found: int

    @property
    def ok(self) -> bool:
        states = [state for _, state, _ in self.phases]
        rates = [rate for _, _, rate in self.phases]
        return (
            states == [expected for _, _, expected in DISK_PHASES]
            and rates[1] < rates[0] / 2
            and rates[2] == 0
            and rates[3] > rates[1]
            and self.found == self.acknowledged
        )


def disk_fill(
    bootstrap: str, broker: str, config: ProxyConfig, scrape_state: Callable[[], str], report: Callable[[str], None]
) -> DiskResult:
    """Cluster volume usage: this demo publishes the broker's snapshots itself (as a sidecar's publisher would,
    from a simulated 100 GB disk) while a paced producer writes through the proxy."""
    import threading

    from confluent_kafka import Consumer, Producer, TopicPartition

    from quota.managers.volume import Snapshot, Volume

    volume = config.volume_usage
    publisher = Producer({"bootstrap.servers": broker})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1, "message.timeout.ms": 120000})
    acked: list[float] = []
    stop, aborted = threading.Event(), threading.Event()

    def delivered(err, msg) -> None:
        if err is None:
            acked.append(time.monotonic())

    def produce() -> None:  # about 2 MiB/s of 1 KiB messages
        start, n = time.monotonic(), 0
        while not stop.is_set():
            if n * 1024 > (time.monotonic() - start) * 2 * 2**20:
                producer.poll(0.005)
                continue
            try:
                producer.produce(DISK_TOPIC, b"d" * 1024, on_delivery=delivered)
                n += 1
            except BufferError:
                producer.poll(0.01)
            producer.poll(0)
        if aborted.is_set():  # the demo is stopping: drop what is still queued, do not wait for it
            producer.purge()
        producer.flush(0 if aborted.is_set() else 60)

    def publish(used_percent: int) -> None:
        snapshot = Snapshot(
            DISK_BROKER,
            int(time.time() * 1000),
            Limit("MinFreePercentage", 50),
            Limit("MinFreePercentage", 10),
            (Volume("/simulated", 100 * 10**9, used_percent * 10**9),),
        )
        publisher.produce(volume.topic, snapshot.to_json(), key=str(DISK_BROKER).encode())
        publisher.flush(10)

    from quota.managers.volume import Limit

    thread = threading.Thread(target=produce, daemon=True)
    phases = []
    publish(DISK_PHASES[0][1])
    time.sleep(2)
    thread.start()
    try:
        for what, used, expected in DISK_PHASES:
            publish(used)
            time.sleep(DISK_PHASE_SECONDS)
            since = time.monotonic() - DISK_PHASE_SECONDS / 2
            rate = sum(1 for t in acked if t >= since) * 1024 / (DISK_PHASE_SECONDS / 2) / 2**20
            state = scrape_state()
            phases.append((what, state, rate))
            report(
                f"disk {used:3d} % used ({what}): proxy {state:8s} producer acknowledged {rate:5.2f} MiB/s, "
                f"expected {expected}  {'OK' if state == expected else 'FAIL'}"
            )
    except BaseException:
        aborted.set()
        raise
    finally:
        stop.set()
        thread.join(90)
    consumer = Consumer({"bootstrap.servers": broker, "group.id": "disk-check", "enable.auto.commit": False})
    consumer.assign([TopicPartition(DISK_TOPIC, 0, 0)])
    found, deadline = 0, time.monotonic() + 30
    while found < len(acked) and time.monotonic() < deadline:
        found += sum(1 for m in consumer.consume(10000, 1) if not m.error())
    consumer.close()
    result = DiskResult(tuple(phases), len(acked), found)
    report(
        f"disk fill: produce OPEN, then throttled, then paused (0 acknowledged), then OPEN again; "
        f"{result.found}/{result.acknowledged} acknowledged messages read back  {'OK' if result.ok else 'FAIL'}"
    )
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
    allowed = limit * ((window["quota.window.num"] - 1) * window["quota.window.size.seconds"] + CONNECT_SECONDS + 1)

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
