"""Producers that write flat out and consumers that read flat out, with kafka-python, confluent-kafka and
aiokafka at their default settings: what the byte-rate tests measure (against Tansu and Apache Kafka)."""

from __future__ import annotations

import asyncio
import threading

VALUE = b"v" * 1000


class Flat:
    """Runs a producer flat out in a thread until stopped; remembers every acknowledged value."""

    def __init__(self, produce) -> None:
        self.produce = produce
        self.stop = threading.Event()
        self.acked: list[bytes] = []
        self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            self.produce(self)
        except Exception as exc:  # reported by the test
            self.error = exc

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(60)
        assert not self.thread.is_alive(), "producer did not finish"
        assert self.error is None, self.error


def kp_flat(bootstrap, topic, client_id):
    def run(flat):
        from kafka import KafkaProducer

        p = KafkaProducer(
            bootstrap_servers=bootstrap,
            client_id=client_id,
            batch_size=64 * 1024,
            linger_ms=5,
            acks=1,
            max_block_ms=60000,
        )
        seq, pending = 0, []
        while not flat.stop.is_set():
            value = b"%d:" % seq + VALUE
            pending.append((value, p.send(topic, value)))
            seq += 1
            if len(pending) >= 256:  # keep a few batches queued at most (kafka-python 3 has no buffer.memory)
                value0, fut = pending.pop(0)
                fut.get(60)
                flat.acked.append(value0)
        p.flush(60)
        flat.acked.extend(v for v, f in pending if f.get(30))
        p.close(10)

    return run


def ck_flat(bootstrap, topic, client_id, value: bytes = VALUE):
    """``value``: what each record carries after its sequence number (1,000 bytes unless a test needs the client's
    own CPU per byte smaller)."""

    def run(flat):
        from confluent_kafka import Producer

        acked = flat.acked
        p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                "linger.ms": 5,
                "queue.buffering.max.kbytes": 256,
                "batch.size": 64 * 1024,
                "acks": 1,
            }
        )
        seq = 0
        while not flat.stop.is_set():
            record = b"%d:" % seq + value
            try:
                p.produce(topic, record, on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
                seq += 1
            except BufferError:
                p.poll(0.01)
            p.poll(0)
        assert p.flush(60) == 0

    return run


def aio_flat(bootstrap, topic, client_id):
    def run(flat):
        from aiokafka import AIOKafkaProducer

        async def main():
            p = AIOKafkaProducer(
                bootstrap_servers=bootstrap, client_id=client_id, linger_ms=5, acks=1, max_batch_size=64 * 1024
            )
            await p.start()
            seq, pending = 0, []
            try:
                while not flat.stop.is_set():
                    value = b"%d:" % seq + VALUE
                    pending.append((value, await p.send(topic, value)))
                    seq += 1
                    if len(pending) >= 256:  # keep at most a few batches queued, like buffer.memory would
                        value0, fut = pending.pop(0)
                        await fut
                        flat.acked.append(value0)
                for value, fut in pending:
                    await fut
                    flat.acked.append(value)
            finally:
                await p.stop()

        asyncio.run(main())

    return run


def consume_flat(kind, bootstrap, topic, client_id, stop, counted):
    if kind == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, client_id=client_id, enable_auto_commit=False, fetch_max_bytes=1 << 20
        )
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        while not stop.is_set():
            for records in consumer.poll(200).values():
                counted.extend(r.value for r in records)
        consumer.close()
    elif kind == "confluent":
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "g", "client.id": client_id, "enable.auto.commit": False}
        )
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        while not stop.is_set():
            for m in consumer.consume(500, 0.2):
                if not m.error():
                    counted.append(m.value())
        consumer.close()
    else:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def main():
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id=client_id, enable_auto_commit=False)
            await consumer.start()
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            while not stop.is_set():
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    counted.extend(r.value for r in records)
            await consumer.stop()

        asyncio.run(main())
