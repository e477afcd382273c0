"""librdkafka (confluent-kafka) workloads whose cost a relay is measured by: each returns its duration, the CPU
seconds the relay process spent on it, the requests the clients sent and their round trips, as librdkafka saw them.

- ``produce_batched`` / ``consume_batched``: 1 KiB messages, batched (linger 5 ms, acks=all), read back from the
  start of every partition;
- ``produce_single``: one message per Produce request (``linger.ms`` 0, ``batch.num.messages`` 1, acks=1, 5 in
  flight): the small requests of idempotent producers that cannot wait;
- ``group_polling``: a consumer group of ``consumers`` subscribed to one topic of many partitions, with a small
  ``fetch.wait.max.ms``, for ``seconds``: fetches, heartbeats and the group's other requests, the traffic of many
  consumers keeping up with quiet partitions.

Requests are each client's ``tx`` (requests sent to brokers) from librdkafka's statistics; round trips are its
per-broker ``rtt`` windows (the time from sending a request to its response), one window per statistics interval.
``cpu`` is a callable giving the relay's CPU seconds (0 for a direct path).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from bench.passthrough import PAYLOAD, produce_all

STATS_MS = 500
SMALL = b"s" * 100


class ClientStats:
    """librdkafka's statistics callback for one client: the requests sent so far and every window's round trips
    per broker connection, as (requests, p50 us, p99 us)."""

    def __init__(self) -> None:
        self.requests = 0
        self.emitted = 0
        self.windows: list[tuple[int, int, int]] = []
        self._lock = threading.Lock()

    def __call__(self, text: str) -> None:
        stats = json.loads(text)
        with self._lock:
            self.requests = stats["tx"]
            self.emitted += 1
            for broker in stats["brokers"].values():
                rtt = broker["rtt"]
                if rtt["cnt"]:
                    self.windows.append((rtt["cnt"], rtt["p50"], rtt["p99"]))

    def settle(self, client) -> None:
        """Serve callbacks until one more statistics interval has been reported (at most 3 intervals)."""
        seen, deadline = self.emitted, time.monotonic() + 3 * STATS_MS / 1000
        while self.emitted == seen and time.monotonic() < deadline:
            client.poll(0.05)


@dataclass
class Outcome:
    seconds: float
    cpu: float
    requests: int
    windows: list[tuple[int, int, int]] = field(default_factory=list)


def _with_stats(config: dict, stats: ClientStats) -> dict:
    return {**config, "statistics.interval.ms": STATS_MS, "stats_cb": stats}


def _producer_run(bootstrap: str, topic: str, count: int, value: bytes, config: dict, cpu: Callable) -> Outcome:
    stats = ClientStats()
    producer = Producer(_with_stats({"bootstrap.servers": bootstrap, **config}, stats))
    c0 = cpu()
    producer.produce(topic, value)  # metadata and connections first
    producer.flush(30)
    start = time.perf_counter()
    produce_all(producer, topic, count, value)
    seconds = time.perf_counter() - start
    c1 = cpu()
    stats.settle(producer)
    return Outcome(seconds, c1 - c0, stats.requests, stats.windows)


def produce_batched(bootstrap: str, topic: str, count: int, cpu: Callable) -> Outcome:
    config = {"linger.ms": 5, "acks": "all", "queue.buffering.max.messages": 500000}
    return _producer_run(bootstrap, topic, count, PAYLOAD, config, cpu)


def produce_single(bootstrap: str, topic: str, count: int, cpu: Callable) -> Outcome:
    config = {"linger.ms": 0, "batch.num.messages": 1, "acks": 1, "max.in.flight": 5}
    return _producer_run(bootstrap, topic, count, SMALL, config, cpu)


def consume_batched(bootstrap: str, topic: str, count: int, partitions: int, passes: int, cpu: Callable) -> Outcome:
    """Read the ``count`` messages of ``partitions`` partitions from their start, ``passes`` times over (one pass of
    a fast path takes a fraction of a second); timed from the first assignment to the last message."""
    stats = ClientStats()
    config = {"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False}
    consumer = Consumer(_with_stats({**config, "fetch.max.bytes": 52428800}, stats))
    consumer.list_topics(topic, 30)  # metadata and connections first
    c0, start = cpu(), time.perf_counter()
    for _ in range(passes):
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got = 0
        while got < count:
            messages = consumer.consume(min(10000, count - got), 10)
            if not messages:
                raise RuntimeError(f"{topic}: read {got} of {count} messages back through {bootstrap}")
            got += sum(1 for m in messages if not m.error())
    seconds, c1 = time.perf_counter() - start, cpu()
    stats.settle(consumer)
    consumer.close()
    return Outcome(seconds, c1 - c0, stats.requests, stats.windows)


def group_polling(
    bootstrap: str, topic: str, group: str, consumers: int, partitions: int, seconds: float, cpu: Callable
) -> Outcome:
    """``consumers`` members of ``group`` poll ``topic``; measured for ``seconds`` once every partition is assigned."""
    stop = threading.Event()
    assigned = [0] * consumers
    all_stats = [ClientStats() for _ in range(consumers)]
    errors: list[BaseException] = []

    def member(i: int) -> None:
        def on_assign(c, tps):
            assigned[i] = len(tps)

        def on_revoke(c, tps):
            assigned[i] = 0

        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "fetch.wait.max.ms": 10,
            "auto.offset.reset": "earliest",
        }
        try:
            consumer = Consumer(_with_stats(config, all_stats[i]))
            consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
            while not stop.is_set():
                consumer.poll(0.05)
            consumer.close()
        except BaseException as error:  # reported by the caller
            errors.append(error)

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(consumers)]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 90
        while sum(assigned) != partitions or not all(assigned) or any(s.emitted < 2 for s in all_stats):
            if errors or time.monotonic() > deadline:
                raise RuntimeError(f"group {group} through {bootstrap}: {sum(assigned)} of {partitions} assigned")
            time.sleep(0.1)
        marks = [(s.requests, len(s.windows)) for s in all_stats]
        c0, start = cpu(), time.perf_counter()
        time.sleep(seconds)
        c1, elapsed = cpu(), time.perf_counter() - start
        requests = sum(s.requests - r for s, (r, _) in zip(all_stats, marks))
        windows = [w for s, (_, n) in zip(all_stats, marks) for w in s.windows[n:]]
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    if errors:
        raise errors[0]
    return Outcome(elapsed, c1 - c0, requests, windows)
