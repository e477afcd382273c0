"""The workloads of ``bench/anchors_byte_rate.py``: each client library's producer and consumer at its default
settings, flat out with 1000-byte values, counting the value bytes acknowledged or received (with the time) into a
:class:`Series`; the unthrottled probe beside them; the thread each runs in.

Each driver is ``run(bootstrap, topic, client_id, stop, series)`` and returns once ``stop`` is set (the Java tools'
drivers are made for a cluster, whose JVM command they run). :func:`driver` picks one by direction and client.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import threading
import time

from tests.kafka_cluster import CONSUMER_PERF, PRODUCER_PERF

VALUE = b"v" * 1000
CLIENTS = ("librdkafka", "kafka-python", "aiokafka", "java")
PARTITIONS = 3  # of each path's produce topic
# The largest request each client sends flat out at its defaults: produce (batch size x partitions), fetch (one
# partition's max fetch size; the consume topic has one partition).
PRODUCE_REQUEST = {
    "librdkafka": 1_000_000,
    "kafka-python": 16384 * PARTITIONS,
    "aiokafka": 16384 * PARTITIONS,
    "java": 16384 * PARTITIONS,
}
FETCH_RESPONSE = {"librdkafka": 1_048_576, "kafka-python": 1_048_576, "aiokafka": 1_048_576, "java": 1_048_576}


class Series:
    """(monotonic time, value bytes) of each acknowledgement or receipt, appended from any thread."""

    def __init__(self) -> None:
        self.events: list[tuple[float, int]] = []
        self.error: BaseException | None = None


# -- producers, each at its library's default settings ------------------------------------------------------------


def librdkafka_produce(bootstrap, topic, cid, stop, series):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "client.id": cid})
    events = series.events

    def acked(err, msg):
        if err is None:
            events.append((time.monotonic(), len(msg.value())))

    while not stop.is_set():
        try:
            p.produce(topic, VALUE, on_delivery=acked)
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    p.purge()
    p.flush(5)


def kafka_python_produce(bootstrap, topic, cid, stop, series):
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, client_id=cid)
    room = threading.Semaphore(8192)  # kafka-python 3 has no buffer.memory: the application bounds what it queues
    events = series.events

    def acked(_):
        events.append((time.monotonic(), len(VALUE)))
        room.release()

    while not stop.is_set():
        if room.acquire(timeout=0.2):
            p.send(topic, VALUE).add_callback(acked).add_errback(lambda _: room.release())
    p.close(5)


def aiokafka_produce(bootstrap, topic, cid, stop, series):
    from aiokafka import AIOKafkaProducer

    async def main():
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id=cid)
        await p.start()
        events = series.events

        def acked(fut):
            if not fut.cancelled() and fut.exception() is None:
                events.append((time.monotonic(), len(VALUE)))

        try:
            while not stop.is_set():
                (await p.send(topic, VALUE)).add_done_callback(acked)  # send() waits while its batches are full
        finally:
            await asyncio.wait_for(p.stop(), 10)

    asyncio.run(main())


def java_lines(command, stop, on_line):
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )

    def stopper():
        stop.wait()
        proc.terminate()

    threading.Thread(target=stopper, daemon=True).start()
    for line in proc.stdout:
        on_line(time.monotonic(), line)
    proc.wait()


def java_produce(cluster):
    sent = re.compile(r"^(\d+) records sent, ")

    def run(bootstrap, topic, cid, stop, series):
        command = cluster.java(
            PRODUCER_PERF,
            "--topic",
            topic,
            "--num-records",
            str(10**9),
            "--record-size",
            str(len(VALUE)),
            "--throughput",
            "-1",
            "--reporting-interval",
            "1000",
            "--command-property",
            f"bootstrap.servers={bootstrap}",
            f"client.id={cid}",
        )

        def on_line(t, line):
            found = sent.match(line)
            if found:  # one line per reporting interval: the records acknowledged in it
                series.events.append((t, int(found.group(1)) * len(VALUE)))

        java_lines(command, stop, on_line)

    return run


# -- consumers, each at its library's default settings ------------------------------------------------------------


def librdkafka_consume(bootstrap, topic, cid, stop, series):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "client.id": cid, "group.id": cid, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    while not stop.is_set():
        for m in c.consume(1000, 0.2):
            if not m.error():
                series.events.append((time.monotonic(), len(m.value())))
    c.close()


def kafka_python_consume(bootstrap, topic, cid, stop, series):
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, client_id=cid, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    while not stop.is_set():
        for records in c.poll(200).values():
            t = time.monotonic()
            series.events.extend((t, len(r.value)) for r in records)
    c.close()


def aiokafka_consume(bootstrap, topic, cid, stop, series):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def main():
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id=cid, enable_auto_commit=False)
        await c.start()
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        await c.seek_to_beginning(tp)
        try:
            while not stop.is_set():
                for records in (await c.getmany(timeout_ms=200)).values():
                    t = time.monotonic()
                    series.events.extend((t, len(r.value)) for r in records)
        finally:
            await c.stop()

    asyncio.run(main())


def java_consume(cluster):
    def run(bootstrap, topic, cid, stop, series):
        command = cluster.java(
            CONSUMER_PERF,
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--num-records",
            str(10**9),
            "--timeout",
            "600000",
            "--reporting-interval",
            "1000",
            "--show-detailed-stats",
            "--hide-header",
            "--group",
            cid,
            "--command-property",
            f"client.id={cid}",
        )
        last = [0]

        def on_line(t, line):
            fields = [f.strip() for f in line.split(",")]
            if len(fields) >= 6 and fields[4].isdigit():  # time, thread, MB, MB/s, records so far, ...
                total = int(fields[4])
                series.events.append((t, (total - last[0]) * len(VALUE)))
                last[0] = total

        java_lines(command, stop, on_line)

    return run


def probe(bootstrap, topic, stop, latencies_ms):
    """An unthrottled confluent-kafka producer (default settings) beside the limited one: 50 records/s of 1000 B,
    each delivery's latency (librdkafka's own, produce() to acknowledgement)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "client.id": "anchor-unthrottled"})

    def acked(err, msg):
        if err is None:
            latencies_ms.append(msg.latency() * 1000)

    next_t = time.monotonic()
    while not stop.is_set():
        p.produce(topic, VALUE, on_delivery=acked)
        next_t += 0.02
        p.poll(max(0.0, next_t - time.monotonic()))
    p.flush(10)


def threaded(target, *args) -> threading.Thread:
    series = args[-1]

    def run():
        try:
            target(*args)
        except BaseException as error:  # reported with the figures
            if isinstance(series, Series):
                series.error = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def driver(direction: str, kind: str, cluster):
    """The ``run(bootstrap, topic, client_id, stop, series)`` of client ``kind`` (one of :data:`CLIENTS`) for
    ``direction`` (``produce`` or ``consume``); the Java tools run on ``cluster``'s JVM."""
    if direction == "produce":
        drivers = {
            "librdkafka": librdkafka_produce,
            "kafka-python": kafka_python_produce,
            "aiokafka": aiokafka_produce,
            "java": java_produce,
        }
    else:
        drivers = {
            "librdkafka": librdkafka_consume,
            "kafka-python": kafka_python_consume,
            "aiokafka": aiokafka_consume,
            "java": java_consume,
        }
    return drivers[kind](cluster) if kind == "java" else drivers[kind]
