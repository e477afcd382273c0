"""``make demo``'s disk filling up: cluster volume usage moving a paced producer through the volume states, judged
from what the producer saw acknowledged (:func:`disk_fill`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from config.model import ProxyConfig

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
    assert volume is not None, "demo/demo.yaml configures volume_usage"
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
    try:  # a signal may come at any point from here, the first snapshot's flush included
        publish(DISK_PHASES[0][1])
        time.sleep(2)
        thread.start()
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
        if thread.ident is not None:  # started
            thread.join(90)
        if aborted.is_set():  # a snapshot still queued would be reported by librdkafka when the publisher is
            publisher.purge()  # destroyed, after the demo's verdict line (a SIGTERM during publish's flush)
            publisher.flush(1)
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
