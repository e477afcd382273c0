"""Produce and consume with each real client library, for the integration tests.

Every helper produces ``count`` keyed messages whose value is ``key:seq`` and reads a topic back from the
beginning by partition assignment (no consumer group), returning ``{partition: [values in offset order]}``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter, defaultdict

KEYS = 16


def messages(count: int):
    for seq in range(count):
        key = f"k{seq % KEYS}"
        yield key.encode(), f"{key}:{seq}".encode()


def assert_exactly_once_in_order(by_partition: dict[int, list[bytes]], count: int) -> None:
    values = [v for vs in by_partition.values() for v in vs]
    assert len(values) == count, f"expected {count} messages, got {len(values)}"
    assert len(set(values)) == count, "duplicates"
    key_partition: dict[str, int] = {}
    for partition, vs in by_partition.items():
        last_seq: dict[str, int] = {}
        for v in vs:
            key, seq = v.decode().split(":")
            assert key_partition.setdefault(key, partition) == partition, f"{key} in two partitions"
            assert int(seq) > last_seq.get(key, -1), f"out of order in partition {partition}: {v!r}"
            last_seq[key] = int(seq)


# -- kafka-python --------------------------------------------------------------------------------------------


def kp_create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kp-admin")
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def kp_delete_topic(bootstrap: str, topic: str) -> None:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kp-admin")
    try:
        admin.delete_topics([topic])
        assert topic not in admin.list_topics()
    finally:
        admin.close()


def kp_produce(bootstrap: str, topic: str, count: int, **config) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="kp-producer", **config)
    try:
        futures = [producer.send(topic, key=k, value=v) for k, v in messages(count)]
        producer.flush(60)
        if config.get("acks", 1) != 0:
            for f in futures:
                f.get(30)
    finally:
        producer.close(10)


def kp_consume(bootstrap: str, topic: str, count: int, timeout: float = 60.0, **config) -> dict[int, list[bytes]]:
    """``count`` records of every partition of ``topic`` from the start, without a group; ``config``: more
    KafkaConsumer settings (e.g. ``isolation_level``)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="kp-consumer", enable_auto_commit=False, **config)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        out: dict[int, list[bytes]] = defaultdict(list)
        deadline = time.monotonic() + timeout
        got = 0
        while got < count and time.monotonic() < deadline:
            for tp, records in consumer.poll(500).items():
                out[tp.partition].extend(r.value for r in records)
                got += len(records)
        return dict(out)
    finally:
        consumer.close()


# -- aiokafka ------------------------------------------------------------------------------------------------


async def aio_create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="aio-admin")
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()


async def aio_delete_topic(bootstrap: str, topic: str) -> None:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="aio-admin")
    await admin.start()
    try:
        await admin.delete_topics([topic])
        assert topic not in await admin.list_topics()
    finally:
        await admin.close()


async def aio_produce(bootstrap: str, topic: str, count: int, **config) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="aio-producer", **config)
    await producer.start()
    try:
        futures = [await producer.send(topic, key=k, value=v) for k, v in messages(count)]
        await producer.flush()
        if config.get("acks", 1) != 0:
            await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def aio_partitions(bootstrap: str, topic: str) -> list[int]:
    """The topic's partitions, asked of the cluster now (aiokafka's admin client: its consumer has no public call to
    refresh its metadata)."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="aio-admin")
    await admin.start()
    try:
        (described,) = await admin.describe_topics([topic])
        return sorted(p["partition"] for p in described["partitions"])
    finally:
        await admin.close()


async def aio_consume(bootstrap: str, topic: str, count: int, timeout: float = 60.0) -> dict[int, list[bytes]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id="aio-consumer", enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        if not partitions:  # created a moment ago: not in the consumer's first metadata
            partitions = [TopicPartition(topic, p) for p in await aio_partitions(bootstrap, topic)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        out: dict[int, list[bytes]] = defaultdict(list)
        got = 0
        deadline = time.monotonic() + timeout
        while got < count and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for tp, records in batch.items():
                out[tp.partition].extend(r.value for r in records)
                got += len(records)
        return dict(out)
    finally:
        await consumer.stop()


# -- confluent-kafka -----------------------------------------------------------------------------------------


def ck_create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


def ck_delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics([topic]).values():
        future.result(30)
    assert topic not in admin.list_topics(timeout=10).topics


def ck_produce(bootstrap: str, topic: str, count: int, records=None, **config) -> None:
    """``count`` of :func:`messages` (or the (key, value) pairs of ``records``), every one acknowledged."""
    from confluent_kafka import Producer

    errors: list = []
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "ck-producer", **config})
    for k, v in messages(count) if records is None else records:
        while True:
            try:
                producer.produce(topic, key=k, value=v, on_delivery=lambda err, msg: err and errors.append(err))
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]


STALL_TENTHS = 5  # a cluster budget's start-up debt being paid: at least half a second with nothing admitted
BURST_SECONDS = 3  # three sidecars start with a full bucket each: a second of the quota


def steady_after_debt(acked: list, now_tenth: int, rate: float) -> int | None:
    """Where a tenant's steady rate under a shared budget can be measured from, in tenths of a second since its
    producers started (``acked``: one Counter of admitted bytes per tenth for each producer), or None while it
    cannot be told yet. Each sidecar starts with a full bucket and admits what is queued before it sees the others'
    usage; all then pay that debt back, admitting nothing for seconds but for trickles as each bucket comes back
    to 0 a sync or two apart, the longer the busier the machine. The answer is the first whole second, after the
    first stall (STALL_TENTHS empty tenths) that follows the burst, that admitted at least half of ``rate``: the
    debt is paid by then. The burst is BURST_SECONDS x ``rate`` admitted, the three sidecars' full buckets (one
    second of the quota each): under load the producers start unevenly, and a make test run paused half a second
    at 2.4 x, before the third bucket was spent (at twice ``rate`` that pause was taken for the debt, and the burst
    was measured as the steady rate). A budget that is not shared has no stall, and never gives an answer."""
    empty, stalled = 0, False
    admitted = 0
    for tenth in range(now_tenth):
        got = sum(into[tenth] for into in acked)
        if got and admitted >= BURST_SECONDS * rate and empty >= STALL_TENTHS:
            stalled = True  # a stall after the burst: a pause before it (clients finding their leaders) is not one
        admitted += got
        empty = 0 if got else empty + 1
        if stalled and tenth + 10 <= now_tenth and got:
            second = sum(into[t] for into in acked for t in range(tenth, tenth + 10))
            if second >= 0.5 * rate:
                return tenth
    return None


def ck_flat_out(producer, topic: str, value: bytes, halt, on_delivery, partition: int | None = None) -> None:
    """Keep a confluent-kafka ``producer``'s local queue full of ``value`` for ``topic`` (its ``partition`` if given,
    else where the partitioner puts it) until ``halt`` is set (a tenant flat out); then drop what is still queued or
    in flight (the tenant stops at once)."""
    where = {} if partition is None else {"partition": partition}
    while not halt.is_set():
        try:
            producer.produce(topic, value, on_delivery=on_delivery, **where)
        except BufferError:
            producer.poll(0.05)
            continue
        producer.poll(0)
    producer.purge(in_queue=True, in_flight=True)
    producer.flush(1)


def flat_out_into(
    bootstrap: str, topic: str, t0: float, acked: Counter, halt: threading.Event, client_id: str = "shared"
) -> None:
    """A confluent-kafka producer (64 KiB batches) flat out to ``topic`` through ``bootstrap`` until ``halt`` is set:
    the bytes acknowledged added to ``acked`` per tenth of a second since ``t0`` (several producers may share both)."""
    from confluent_kafka import Producer

    def done(err, msg) -> None:
        if err is None:
            acked[int((time.monotonic() - t0) * 10)] += len(msg)

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "batch.size": 65536})
    ck_flat_out(producer, topic, b"v" * 1000, halt, done)


def acked_flat_out(bootstrap: str, topic: str, seconds: float, client_id: str = "shared") -> Counter:
    """:func:`flat_out_into` for ``seconds``: the bytes acknowledged per tenth of a second since its start."""
    acked: Counter = Counter()
    halt = threading.Event()
    threading.Timer(seconds, halt.set).start()
    flat_out_into(bootstrap, topic, time.monotonic(), acked, halt, client_id)
    return acked


def ck_consume(bootstrap: str, topic: str, count: int, timeout: float = 60.0) -> dict[int, list[bytes]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False, "client.id": "ck-consumer"}
    )
    try:
        meta = consumer.list_topics(topic, timeout=10)
        partitions = sorted(meta.topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        out: dict[int, list[bytes]] = defaultdict(list)
        got = 0
        deadline = time.monotonic() + timeout
        while got < count and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if msg.error():
                    continue
                out[msg.partition()].append(msg.value())
                got += 1
        return dict(out)
    finally:
        consumer.close()


# -- a confluent-kafka producer in a thread, counting its throttles ------------------------------------------------


class ThrottledWriter:
    """A confluent-kafka producer writing ``topics`` in a thread (one ``value`` to each in turn; to ``partition``
    when given, else where its partitioner puts it), flat out or ``per_s`` rounds a second, counting the throttles
    its broker connection reports (``throttle_cb``, from the responses' ``throttle_time_ms``) and the messages
    acknowledged. A context manager: the thread runs inside it, and its error is raised on leaving."""

    def __init__(
        self,
        bootstrap: str,
        client_id: str,
        topics: tuple[str, ...],
        value: bytes,
        partition: int | None = None,
        per_s: float | None = None,
    ) -> None:
        self.bootstrap, self.client_id, self.topics, self.value = bootstrap, client_id, topics, value
        self.where = {} if partition is None else {"partition": partition}
        self.per_s = per_s
        self.throttles: list[float] = []
        self.acked = 0
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from confluent_kafka import Producer

        def delivered(err, msg):
            if err is None:
                self.acked += 1

        try:
            p = Producer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "client.id": self.client_id,
                    "linger.ms": 5,
                    "batch.size": 16 * 1024,
                    "queue.buffering.max.kbytes": 128,
                    "acks": 1,
                    "throttle_cb": lambda event: self.throttles.append(event.throttle_time),
                }
            )
            while not self.stop.is_set():
                for topic in self.topics:
                    try:
                        p.produce(topic, self.value, on_delivery=delivered, **self.where)
                    except BufferError:
                        p.poll(0.01)
                p.poll(0)
                if self.per_s is not None:
                    self.stop.wait(1 / self.per_s)
            assert p.flush(30) == 0
        except BaseException as exc:  # reported by the test
            self.error = exc

    def __enter__(self) -> ThrottledWriter:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(60)
        assert not self.thread.is_alive() and self.error is None, self.error
