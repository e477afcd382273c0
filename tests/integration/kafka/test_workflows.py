"""Client workflows against Apache Kafka (kafka3: 3 nodes, replication factor 3, min.insync.replicas 2) with
kafka-python, aiokafka and confluent-kafka at their default settings, through the proxy with every quota on.

Every workflow runs against five targets, one after another (a module-scoped fixture, so each set of proxies is
started once): ``direct`` (the DIRECT listeners, no proxy), three sidecars (one per node, where the node advertises
its CLIENT listener) and one cluster-mode proxy in front of the DIRECT listeners, each under GENEROUS quotas
(nothing may be throttled: every throttle counter of every proxy unchanged by the workflow) and under BITING ones
(each workflow's own quota throttles: its counter grows). Every quota is on in both: ``producer_byte_rate``,
``consumer_byte_rate``, ``controller_mutation_rate``, ``producer_ids_rate`` (per user: every client here is
``ANONYMOUS``) and ``connection_creation_rate`` (per IP, 127.0.0.1). Each workflow returns what it saw with topic
names taken out, and the result through a proxy must equal the direct one exactly (records per partition in offset
order, offsets, configs, group state), besides the workflow's own assertions:

- codecs: every record exactly once, each producer's records of a key in order in one partition, each client reads
  the same records per partition, ListOffsets earliest 0 and latest the count read (kafka-python and librdkafka
  agree); biting: producer, consumer and connection-rate throttles (a neighbour on the same IP reconnecting in a
  loop as the workflow starts);
- consumer group: rebalance with no record twice or lost, describe (Stable, 2 members; Empty once left), committed
  offsets = ends, reset to earliest (0) and a new member reads all 400 again; biting: consumer throttles;
- idempotent and transactional producers: read_committed sees every committed record once and no aborted one,
  read_uncommitted sees the aborted ones too; biting: a new producer id held in the proxy;
- admin: create (three clients), CreatePartitions, AlterConfigs and IncrementalAlterConfigs (DescribeConfigs shows
  the values, DELETE restores the default), DeleteRecords moves ListOffsets earliest to the cut, latest unchanged,
  DescribeLogDirs lists every replica with equal sizes, delete; biting: mutation throttles.

Codecs: confluent-kafka, kafka-python and aiokafka each produce with all five into one topic, and each reads it all
back (the test extras install the codec libraries the two Python clients need).

What an application must retry is retried, as an application would (:func:`retry`): THROTTLING_QUOTA_EXCEEDED (89),
which kafka-python, aiokafka and librdkafka hand to the application (the Java admin client retries it itself), and
the errors the client library marks retriable: kafka-python raises NodeNotReadyError while it waits out a
throttle_time_ms and KafkaConnectionError when a connection the connection_creation_rate held is closed (KIP-612,
as Kafka closes it); neither request reached the broker. Producers and consumers run unchanged.
"""

from __future__ import annotations

import asyncio
import random
import socket
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

from tests.harness import cluster_ports, start_proxy, wait_until
from tests.integration import clients as c
from tests.kafka_cluster import unique_topic

pytestmark = pytest.mark.integration

WINDOWS = {
    "quota.window.num": 2,
    "quota.window.size.seconds": 1,
    "controller.quota.window.num": 1,
    "controller.quota.window.size.seconds": 1,
    "producer.id.quota.window.num": 1,
    "producer.id.quota.window.size.seconds": 2,
}
GENEROUS = [
    {
        "entity": {"user": "<default>"},
        "producer_byte_rate": 10**9,
        "consumer_byte_rate": 10**9,
        "controller_mutation_rate": 10**6,
        "producer_ids_rate": 10**6,
    },
    {"entity": {"ip": "<default>"}, "connection_creation_rate": 10**6},
]
# Per broker (sidecar, or a cluster-mode proxy's broker port): 4 KB/s produced and 16 KB/s fetched after a
# burst of one window; a new producer id a second, burst 2 (three producers starting at once: one is held). Per
# proxy: 5 partitions created or deleted per second with a burst of 5 (the admin workflow mutates 18).
BITING = [
    {
        "entity": {"user": "<default>"},
        "producer_byte_rate": 4096,
        "consumer_byte_rate": 16384,
        "controller_mutation_rate": 5,
        "producer_ids_rate": 2,
    },
]
# connections from 127.0.0.1 a second: a sidecar sees the connections to its one broker, a cluster-mode proxy
# every connection (bootstrap and the three broker ports), about three times as many
BITING_CONNECTIONS = {"sidecars": 4, "cluster": 12}
THROTTLES = {  # what shows that a quota bit: metric name, labels
    "producer_byte_rate": ("kafka_quota_proxy_quota_throttled_responses_total", {"quota": "producer_byte_rate"}),
    "consumer_byte_rate": ("kafka_quota_proxy_quota_throttled_responses_total", {"quota": "consumer_byte_rate"}),
    "controller_mutation_rate": ("kafka_quota_proxy_controller_mutation_throttled_requests_total", {}),
    "producer_ids_rate": ("kafka_quota_proxy_producer_ids_throttle_time_seconds_total", {}),
    "connection_creation_rate": ("kafka_quota_proxy_ip_connection_accept_throttles_total", {}),
}
TARGETS = ["direct", "sidecars-generous", "sidecars-biting", "cluster-generous", "cluster-biting"]
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@dataclass
class Target:
    name: str
    bootstrap: str
    proxies: list = field(default_factory=list)
    brokers: dict[int, int] = field(default_factory=dict)  # node id -> the port clients must be given for it
    direct_bootstrap: str = ""  # the cluster itself, for data a workflow only needs there (not what it tests)

    @property
    def biting(self) -> bool:
        return self.name.endswith("biting")

    def total(self, quota: str) -> float:
        name, labels = THROTTLES[quota]
        return sum(p.scraped_sum(name, **labels) for p in self.proxies)

    def throttles(self) -> dict[str, float]:
        return {quota: self.total(quota) for quota in THROTTLES}


@pytest.fixture(scope="module", params=TARGETS)
def target(request, kafka3):
    mode, _, variant = request.param.partition("-")
    quotas = (
        GENEROUS
        if variant != "biting"
        else BITING + [{"entity": {"ip": "<default>"}, "connection_creation_rate": BITING_CONNECTIONS[mode]}]
    )
    if mode == "direct":
        yield direct(kafka3)
    elif mode == "sidecars":
        with kafka3.sidecars(quotas=quotas, **WINDOWS) as proxies:
            yield Target(
                request.param,
                kafka3.proxy_bootstrap,
                proxies,
                {node.node_id: node.proxy_port for node in kafka3.nodes},
                kafka3.direct_bootstrap,
            )
    else:
        bootstrap_port, base = cluster_ports()
        proxy = start_proxy(
            {
                "upstream": {"bootstrap_servers": kafka3.direct_bootstrap.split(",")},
                "listeners": [
                    {
                        "name": "PLAINTEXT",
                        "bind": f"127.0.0.1:{bootstrap_port}",
                        "advertised_host": "127.0.0.1",
                        "broker_port_base": base,
                    }
                ],
                "metrics": {"bind": "127.0.0.1:0"},
                "settings": WINDOWS,
                "quotas": quotas,
            }
        )
        try:
            yield Target(
                request.param,
                proxy.bootstrap,
                [proxy],
                {node.node_id: base + node.node_id for node in kafka3.nodes},
                kafka3.direct_bootstrap,
            )
        finally:
            proxy.stop()


def direct(kafka3) -> Target:
    return Target(
        "direct",
        kafka3.direct_bootstrap,
        [],
        {node.node_id: node.direct_port for node in kafka3.nodes},
        kafka3.direct_bootstrap,
    )


DIRECT: dict[str, object] = {}


def same_as_direct(key: str, target: Target, result, workflow, kafka3):
    """The workflow's result through ``target`` equals the direct one (run now if the direct target did not run)."""
    if target.name == "direct":
        DIRECT[key] = result
        return
    if key not in DIRECT:
        DIRECT[key] = workflow(direct(kafka3))
    assert result == DIRECT[key], f"{key} through {target.name} differs from a direct connection"


def check_quotas(target: Target, before: dict, bite: tuple[str, ...]) -> None:
    """Generous: nothing throttled. Biting: each quota in ``bite`` throttled at least once during the workflow."""
    after = target.throttles()
    grew = {q for q in THROTTLES if after[q] > before[q]}
    if not target.proxies:
        return
    if target.biting:
        assert set(bite) <= grew, f"quotas that never bit through {target.name}: {set(bite) - grew} ({after})"
    else:
        assert not grew, f"generous quotas throttled through {target.name}: {grew} ({after})"


# -- helpers --------------------------------------------------------------------------------------------------


@contextmanager
def reconnecting_neighbour(target: Target):
    """Through a biting target, a tenant on the workflow's IP (127.0.0.1) that reconnects in a loop while the
    workflow starts: three times ``connection_creation_rate`` connections to the target's first address at once,
    each closed as soon as it is open. The workflow's clients then meet an IP over its rate (its next connections
    held) whatever the machine's load: on their own, a loaded machine's clients spread their connections below the
    rate (a full run at load 19 held none). Elsewhere nothing."""
    if not target.biting:
        yield
        return
    host, _, port = target.bootstrap.split(",")[0].rpartition(":")
    mode = target.name.partition("-")[0]

    def burst() -> None:
        for _ in range(3 * BITING_CONNECTIONS[mode]):
            try:
                socket.create_connection((host, int(port)), timeout=10).close()
            except OSError:  # refused or timed out by a throttled accept: a reconnecting tenant tries again
                pass

    neighbour = threading.Thread(target=burst, name="reconnecting-neighbour", daemon=True)
    neighbour.start()
    try:
        yield
    finally:
        neighbour.join(60)


def released(barrier: threading.Barrier, records):
    """``records``, the first once every party of ``barrier`` has asked for its first (a client iterates its records
    once it has started: aiokafka's loop waits here too, with nothing else to do)."""
    barrier.wait(60)
    yield from records


def values(tag: str, count: int, size: int = 100):
    """``count`` (key, value) pairs, value ``tag:key:seq:`` and pseudo-random bytes (so codecs cannot shrink them
    below the biting quotas), the same every run."""
    rng = random.Random(tag)
    for seq in range(count):
        key = f"k{seq % 8}"
        yield key.encode(), f"{tag}:{key}:{seq}:".encode() + rng.randbytes(size)


def create_topic(bootstrap: str, topic: str, partitions: int, **configs) -> None:
    """kafka-python's admin, retried while the mutation quota rejects it."""
    admin = kp_admin(bootstrap)
    try:
        retry(
            lambda: admin.create_topics(
                {topic: {"num_partitions": partitions, "replication_factor": 3, "configs": configs}}
            )
        )
        wait_until(lambda: _leaders_known(admin, topic, partitions), 30, f"{topic}'s leaders")
    finally:
        admin.close()


def _leaders_known(admin, topic, partitions) -> bool:
    described = admin.describe_topics([topic])
    parts = described[0]["partitions"] if described and not described[0]["error_code"] else []
    return len(parts) == partitions and all(p["leader_id"] >= 0 for p in parts)


def retriable(error: BaseException) -> bool:
    """What an application retries: THROTTLING_QUOTA_EXCEEDED (89), and whatever the client library itself marks
    retriable (kafka-python's and aiokafka's ``retriable``, librdkafka's ``KafkaError.retriable()``): kafka-python
    raises NodeNotReadyError "Node paused: {'throttle'}" rather than wait out a throttle_time_ms, and
    KafkaConnectionError when a connection the connection_creation_rate held is then closed (as Kafka closes it);
    neither request reached the broker."""
    if "THROTTLING_QUOTA_EXCEEDED" in repr(error) or getattr(error, "errno", None) == 89:
        return True
    if getattr(error, "retriable", False) is True:
        return True
    inner = error.args[0] if getattr(error, "args", None) else None
    return callable(getattr(inner, "retriable", None)) and inner.retriable()


def retry(call, timeout: float = 60):
    """``call()`` until it does not fail with a retriable error. Creates go one topic a request: of a request
    naming several, the mutation quota may reject some topics and let the others through (as Kafka does), and the
    clients raise for the whole request."""
    outcome = []

    def attempt():
        try:
            outcome.append(call())
            return True
        except Exception as error:  # noqa: BLE001
            if retriable(error):
                return False
            raise

    wait_until(attempt, timeout, "a call that kept failing with retriable errors", interval=0.2)
    return outcome[-1]


class Retrying:
    """A client whose every call is retried as :func:`retry` does (an application's loop around admin calls)."""

    def __init__(self, make) -> None:
        self._client = retry(make)

    def __getattr__(self, name):
        attr = getattr(self._client, name)
        if name == "close" or not callable(attr):
            return attr
        return lambda *args, **kwargs: retry(lambda: attr(*args, **kwargs))


def kp_admin(bootstrap: str) -> Retrying:
    from kafka.admin import KafkaAdminClient

    return Retrying(lambda: KafkaAdminClient(bootstrap_servers=bootstrap, client_id="wf-admin"))


def ck_consume_all(bootstrap: str, topic: str, count: int, **config) -> dict[int, list[bytes]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "wf-unused",
            "enable.auto.commit": False,
            "client.id": "wf-ck-consumer",
            **config,
        }
    )
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        out: dict[int, list[bytes]] = defaultdict(list)
        got = 0
        deadline = time.monotonic() + 60
        while got < count and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                assert not msg.error() or msg.error().code() == -191, msg.error()  # -191: partition EOF
                if not msg.error():
                    out[msg.partition()].append(msg.value())
                    got += 1
        return dict(out)
    finally:
        consumer.close()


def kp_produce_records(bootstrap: str, topic: str, records, spread: int = 0, **config) -> None:
    """``spread``: the n-th record to partition n % spread, not where its key hashes."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="wf-kp-producer", **config)
    try:
        futures = [
            producer.send(topic, key=k, value=v, partition=seq % spread if spread else None)
            for seq, (k, v) in enumerate(records)
        ]
        producer.flush(60)
        for future in futures:
            future.get(30)
    finally:
        producer.close(10)


async def aio_started(make):
    """An aiokafka client from ``make()``, started. aiokafka gives up at once when its bootstrap connection is
    refused (the biting per-IP connection rate closes it, as Kafka does): made and started again, as an application
    would, before anything is sent or read."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while True:
        client = make()
        try:
            await client.start()
            return client
        except Exception as error:  # noqa: BLE001
            await client.stop()
            if not retriable(error) or loop.time() > deadline:
                raise
            await asyncio.sleep(0.2)


async def aio_produce_records(bootstrap: str, topic: str, records, **config) -> None:
    from aiokafka import AIOKafkaProducer

    producer = await aio_started(
        lambda: AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="wf-aio-producer", **config)
    )
    try:
        futures = [await producer.send(topic, key=k, value=v) for k, v in records]
        await producer.flush()
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[str, list[int]]:
    """ListOffsets earliest and latest of every partition, asked with kafka-python's admin and confluent-kafka's;
    both must agree."""
    from confluent_kafka import TopicPartition as CkPartition
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.admin import OffsetSpec as CkSpec
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    admin = kp_admin(bootstrap)
    try:
        out = {}
        for name, spec in (("earliest", OffsetSpec.EARLIEST), ("latest", OffsetSpec.LATEST)):
            got = admin.list_partition_offsets({TopicPartition(topic, p): spec for p in range(partitions)})
            out[name] = [got[TopicPartition(topic, p)].offset for p in range(partitions)]
    finally:
        admin.close()
    ck = AdminClient({"bootstrap.servers": bootstrap, "client.id": "wf-ck-admin"})
    for name, spec in (("earliest", CkSpec.earliest()), ("latest", CkSpec.latest())):
        futures = ck.list_offsets({CkPartition(topic, p): spec for p in range(partitions)})
        got = {tp.partition: f.result(30).offset for tp, f in futures.items()}
        assert [got[p] for p in range(partitions)] == out[name], f"ListOffsets {name}: the two clients differ"
    return out


def delete_topics(bootstrap: str, *topics: str) -> None:
    """The topics deleted in one request, as an application would; the mutation quota may admit some and reject the
    others (THROTTLING_QUOTA_EXCEEDED, as Kafka does: a biting quota of a burst of 5 always rejects some of the
    admin workflow's 9 partitions), and only those are sent again. Then gone from the listing. Every client of
    the workflow is closed or destroyed before; still, on a machine with both cores busy, a client's Metadata
    request sent before its close re-created a topic 50 ms after its deletion (Kafka's auto.create.topics.enable,
    its default): one still listed is deleted again every 5 s until it stays gone."""
    admin = kp_admin(bootstrap)
    left = list(topics)

    def deleted() -> bool:
        nonlocal left
        answer = admin.delete_topics(left, raise_errors=False)["topics"]
        unexpected = {t["name"]: t["error_code"] for t in answer if t["error_code"] not in (0, 3, 89)}
        assert not unexpected, f"deleting topics: {unexpected}"  # 3: gone already (a retry of one deleted)
        left = [t["name"] for t in answer if t["error_code"] == 89]
        return not left

    last = [time.monotonic()]

    def gone() -> bool:
        listed = set(topics) & set(admin.list_topics())
        if listed and time.monotonic() - last[0] > 5:
            admin.delete_topics(list(listed), raise_errors=False)
            last[0] = time.monotonic()
        return not listed

    try:
        wait_until(deleted, 60, f"{topics} deleted within the mutation quota", interval=0.2)
        wait_until(gone, 60, f"{topics} gone")
    finally:
        admin.close()


def by_key_in_order(by_partition: dict[int, list[bytes]], count: int) -> None:
    """Exactly ``count`` distinct records, each key in one partition, each producer's records of a key in order."""
    seen = [v for vs in by_partition.values() for v in vs]
    assert len(seen) == count, f"expected {count} records, got {len(seen)}"
    assert len(set(seen)) == count, "duplicates"
    home: dict[tuple[str, str], int] = {}  # (client, key): one partitioner puts a key in one partition
    for partition, vs in by_partition.items():
        last: dict[tuple[str, str], int] = {}
        for v in vs:
            tag, key, seq = v.split(b":", 3)[:3]
            stream, client = (tag.decode(), key.decode()), (tag.decode().split("-")[0], key.decode())
            assert home.setdefault(client, partition) == partition, f"{client} in two partitions"
            assert int(seq) > last.get(stream, -1), f"out of order in partition {partition}: {v[:30]!r}"
            last[stream] = int(seq)


# -- workflows ------------------------------------------------------------------------------------------------

CODEC_COUNT = 50
CODEC_PARTITIONS = 3


def codecs_workflow(target: Target):
    """One topic (3 partitions): confluent-kafka, kafka-python and aiokafka each produce 50 records with every codec
    (none, gzip, snappy, lz4, zstd); every client reads the topic back whole and they agree. ListOffsets: earliest
    0, latest what was read."""
    topic = unique_topic("wf-codecs")
    create_topic(target.bootstrap, topic, CODEC_PARTITIONS)
    for codec in CODECS:
        c.ck_produce(
            target.bootstrap, topic, 0, records=values(f"ck-{codec}", CODEC_COUNT), **{"compression.type": codec}
        )
        kp_produce_records(
            target.bootstrap,
            topic,
            values(f"kp-{codec}", CODEC_COUNT),
            **({"compression_type": codec} if codec != "none" else {}),
        )
        asyncio.run(
            aio_produce_records(
                target.bootstrap,
                topic,
                values(f"aio-{codec}", CODEC_COUNT),
                **({"compression_type": codec} if codec != "none" else {}),
            )
        )
    count = 3 * len(CODECS) * CODEC_COUNT
    records = ck_consume_all(target.bootstrap, topic, count)
    by_key_in_order(records, count)
    offsets = end_offsets(target.bootstrap, topic, CODEC_PARTITIONS)
    assert offsets["earliest"] == [0] * CODEC_PARTITIONS
    assert offsets["latest"] == [len(records.get(p, [])) for p in range(CODEC_PARTITIONS)]
    # read from the start without a group: a read cut by the biting connection rate is read again whole
    assert retry(lambda: c.kp_consume(target.bootstrap, topic, count)) == records, "kafka-python"
    assert retry(lambda: asyncio.run(c.aio_consume(target.bootstrap, topic, count))) == records, "aiokafka"
    delete_topics(target.bootstrap, topic)
    return {"records": records, "offsets": offsets}


def test_every_codec_round_trips(target, kafka3):
    before = target.throttles()
    with reconnecting_neighbour(target):
        result = codecs_workflow(target)
    same_as_direct("codecs", target, result, codecs_workflow, kafka3)
    check_quotas(target, before, ("producer_byte_rate", "consumer_byte_rate", "connection_creation_rate"))


GROUP_PARTITIONS = 4
GROUP_COUNT = 200
# The first 200 records' values are 1000 bytes: member A's read brings each broker about 67 KB, four seconds of the
# biting 16 KB/s, so the consumer quota bites however slowly a busy machine reads (100-byte values brought 7 KB a
# broker, which bit only when read within the first second: a full run at load 14 saw no throttle); the next 200
# stay at 100 bytes (all 1000 bytes: each biting variant took 62 s instead of about 15)
GROUP_VALUE = 1000


async def _drain(consumer, into: list, until) -> None:
    """getmany and commit after each batch until ``until()``; records appended as (partition, value)."""
    while not until():
        batch = await consumer.getmany(timeout_ms=200)
        for tp, records in batch.items():
            into.extend((tp.partition, r.value) for r in records)
        if batch:
            await consumer.commit()


def group_workflow(target: Target):
    """An aiokafka consumer group: member A reads the first 200 records alone and commits; member B joins and the
    group rebalances (both members hold partitions, none twice); 200 more records are read between them, each
    exactly once. kafka-python's admin describes the group (Stable, 2 members, then Empty once they leave), lists
    its committed offsets (the ends of the partitions), resets them to the earliest, and a confluent-kafka member
    of the group then reads all 400 again from the reset offsets."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    topic, group = unique_topic("wf-group"), unique_topic("wf-group-id")
    create_topic(target.bootstrap, topic, GROUP_PARTITIONS)
    # The first 200 records are written straight to the cluster: the group reading them is what is tested, and
    # through a biting target's 4 KB/s producer quota writing them took most of the test (kafka-python producing
    # under that quota is the codecs workflow's). The next 200 go through the target.
    kp_produce_records(
        target.direct_bootstrap, topic, values("grp-a", GROUP_COUNT, GROUP_VALUE), spread=GROUP_PARTITIONS
    )
    admin = kp_admin(target.bootstrap)

    def member(name):
        # heartbeats every 0.3 s (default 3 s): member A learns of the rebalance B's join starts sooner
        return AIOKafkaConsumer(
            topic,
            bootstrap_servers=target.bootstrap,
            group_id=group,
            client_id=f"wf-{name}",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            heartbeat_interval_ms=300,
        )

    async def run():
        first, second_a, second_b = [], [], []
        a = await aio_started(lambda: member("member-a"))
        try:
            await _drain(a, first, lambda: len(first) >= GROUP_COUNT)
            b = await aio_started(lambda: member("member-b"))
            try:

                def balanced():
                    mine, theirs = a.assignment(), b.assignment()
                    return mine and theirs and not mine & theirs and len(mine | theirs) == GROUP_PARTITIONS

                while not balanced():  # both members poll while the group rebalances
                    await asyncio.gather(
                        _drain(a, second_a, lambda: True), a.getmany(timeout_ms=100), b.getmany(timeout_ms=100)
                    )
                assert not second_a, "records read before the second batch was produced"
                described = admin.describe_groups([group])[group]
                producer = AIOKafkaProducer(bootstrap_servers=target.bootstrap, client_id="wf-aio-producer")
                await producer.start()
                try:
                    for seq, (k, v) in enumerate(values("grp-b", GROUP_COUNT)):
                        await producer.send(topic, key=k, value=v, partition=seq % GROUP_PARTITIONS)
                    await producer.flush()
                finally:
                    await producer.stop()
                done = lambda: len(second_a) + len(second_b) >= GROUP_COUNT  # noqa: E731
                await asyncio.gather(_drain(a, second_a, done), _drain(b, second_b, done))
                owned = {"a": {tp.partition for tp in a.assignment()}, "b": {tp.partition for tp in b.assignment()}}
            finally:
                await b.stop()
        finally:
            await a.stop()
        return first, second_a, second_b, owned, described

    try:
        first, second_a, second_b, owned, described = asyncio.run(run())
        assert sorted(v for _, v in first) == sorted(v for _, v in values("grp-a", GROUP_COUNT, GROUP_VALUE))
        second = [v for _, v in second_a + second_b]
        assert sorted(second) == sorted(v for _, v in values("grp-b", GROUP_COUNT)), "not exactly once"
        assert {p for p, _ in second_a} == owned["a"] and {p for p, _ in second_b} == owned["b"], "rebalanced"
        assert described["group_state"] == "Stable" and len(described["members"]) == 2, described
        ends = end_offsets(target.bootstrap, topic, GROUP_PARTITIONS)["latest"]
        assert ends == [2 * GROUP_COUNT // GROUP_PARTITIONS] * GROUP_PARTITIONS
        partitions = [TopicPartition(topic, p) for p in range(GROUP_PARTITIONS)]

        def committed():
            got = admin.list_group_offsets({group: partitions})[group]
            return [got[tp].offset for tp in partitions]

        assert committed() == ends
        wait_until(
            lambda: admin.describe_groups([group])[group]["group_state"] == "Empty", 30, "the group empty once left"
        )
        reset = admin.reset_group_offsets(group, {tp: OffsetSpec.EARLIEST for tp in partitions})
        assert all(r["error"] is None or r["error"].errno == 0 for r in reset.values()), reset
        assert committed() == [0] * GROUP_PARTITIONS
        again = _ck_group_read(target.bootstrap, topic, group, 2 * GROUP_COUNT)
        assert sorted(again) == sorted([v for _, v in first] + second), "the reset group did not read all again"
        assert committed() == ends
        addresses(target, group)
    finally:
        admin.close()
    delete_topics(target.bootstrap, topic)
    return {
        "ends": ends,
        "state": described["group_state"],
        "members": len(described["members"]),
        "records": sorted(v for _, v in first) + sorted(second),
    }


def addresses(target: Target, group: str) -> None:
    """Clients are given only the target's addresses: every broker in Metadata, and the group's coordinator
    (FindCoordinator), are the proxy ports (sidecar, or broker_port_base + node id in cluster mode), so no client
    reaches a broker directly (the Tansu twin, test_cluster_mode.py, checks the same)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": target.bootstrap, "client.id": "wf-ck-admin"})
    brokers = admin.list_topics(timeout=30).brokers
    assert {b.id: (b.host, b.port) for b in brokers.values()} == {
        n: ("127.0.0.1", port) for n, port in target.brokers.items()
    }
    coordinator = admin.describe_consumer_groups([group])[group].result(30).coordinator
    assert (coordinator.host, coordinator.port) == ("127.0.0.1", target.brokers[coordinator.id])


def _ck_group_read(bootstrap: str, topic: str, group: str, count: int) -> list[bytes]:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "client.id": "wf-ck-member", "enable.auto.commit": False}
    )
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.5):
                assert not msg.error(), msg.error()
                got.append(msg.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def test_consumer_group_rebalance_and_offsets(target, kafka3):
    before = target.throttles()
    result = group_workflow(target)
    same_as_direct("group", target, result, group_workflow, kafka3)
    check_quotas(target, before, ("consumer_byte_rate",))


TXN_PARTITIONS = 3
TXN_COUNT = 50
BURST_PRODUCERS = 5


def exactly_once_workflow(target: Target):
    """Idempotent producers of all three clients (kafka-python, aiokafka with enable_idempotence, confluent-kafka)
    at once (with five more new producer ids beside them), then a confluent-kafka transactional producer: commit, abort, commit. A read_committed consumer
    (confluent-kafka and kafka-python) sees every idempotent record and both committed transactions, exactly once,
    never the aborted one; a read_uncommitted consumer sees the aborted records too."""
    from confluent_kafka import Producer

    topic, burst_topic = unique_topic("wf-eos"), unique_topic("wf-eos-burst")
    create_topic(target.bootstrap, topic, TXN_PARTITIONS)
    create_topic(target.bootstrap, burst_topic, 1)
    # new producer ids at once: the three clients' and BURST_PRODUCERS more (one record each, to a topic of their
    # own, not compared), each started and connected first, then all released together to send. Under load the
    # clients' first Produce requests spread over seconds, time for the biting bucket (burst 2, one a second) to
    # refill: three alone were held only when they landed within about half a second; eight are held unless they
    # spread over more than six seconds.
    together = threading.Barrier(3 + BURST_PRODUCERS)
    with ThreadPoolExecutor(3 + BURST_PRODUCERS) as pool:
        burst = [
            pool.submit(
                c.ck_produce,
                target.bootstrap,
                burst_topic,
                0,
                records=released(together, [(b"k", f"burst-{n}".encode())]),
                **{"enable.idempotence": True, "client.id": f"wf-burst-{n}"},
            )
            for n in range(BURST_PRODUCERS)
        ]
        for done in [
            pool.submit(
                kp_produce_records,
                target.bootstrap,
                topic,
                released(together, values("kp-idem", TXN_COUNT)),
                enable_idempotence=True,
                acks="all",
            ),
            pool.submit(
                lambda: asyncio.run(
                    aio_produce_records(
                        target.bootstrap,
                        topic,
                        released(together, values("aio-idem", TXN_COUNT)),
                        enable_idempotence=True,
                    )
                )
            ),
            pool.submit(
                c.ck_produce,
                target.bootstrap,
                topic,
                0,
                records=released(together, values("ck-idem", TXN_COUNT)),
                **{"enable.idempotence": True},
            ),
            *burst,
        ]:
            done.result()
    delete_topics(target.bootstrap, burst_topic)
    producer = Producer(
        {"bootstrap.servers": target.bootstrap, "client.id": "wf-ck-txn", "transactional.id": unique_topic("wf-txn")}
    )
    producer.init_transactions(60)
    for tag, commit in (("txn-c1", True), ("txn-abort", False), ("txn-c2", True)):
        producer.begin_transaction()
        for k, v in values(tag, TXN_COUNT):
            producer.produce(topic, key=k, value=v)
        if commit:
            producer.commit_transaction(60)
        else:
            producer.flush(60)
            producer.abort_transaction(60)
    del producer  # its last reference: librdkafka's handle is destroyed now, not after the topic is deleted
    committed_tags = ("kp-idem", "aio-idem", "ck-idem", "txn-c1", "txn-c2")
    expected = sorted(v for tag in committed_tags for _, v in values(tag, TXN_COUNT))
    aborted = sorted(v for _, v in values("txn-abort", TXN_COUNT))
    read_committed = ck_consume_all(target.bootstrap, topic, len(expected), **{"isolation.level": "read_committed"})
    by_key_in_order(read_committed, len(expected))
    assert sorted(v for vs in read_committed.values() for v in vs) == expected
    read_uncommitted = ck_consume_all(
        target.bootstrap, topic, len(expected) + len(aborted), **{"isolation.level": "read_uncommitted"}
    )
    assert sorted(v for vs in read_uncommitted.values() for v in vs) == sorted(expected + aborted)
    assert (
        retry(lambda: c.kp_consume(target.bootstrap, topic, len(expected), isolation_level="read_committed"))
        == read_committed
    ), "kafka-python"
    offsets = end_offsets(target.bootstrap, topic, TXN_PARTITIONS)
    # every record plus a commit or abort marker per partition a transaction wrote
    assert sum(offsets["latest"]) > len(expected) + len(aborted)
    delete_topics(target.bootstrap, topic)
    # the three idempotent producers ran at once, so records of different producers interleave differently in each
    # run: each partition's records compared as a set (each producer's own order is checked above)
    return {
        "read_committed": {p: sorted(vs) for p, vs in read_committed.items()},
        "read_uncommitted": {p: sorted(vs) for p, vs in read_uncommitted.items()},
        "offsets": offsets,
    }


class HeldWatch:
    """Scrapes the target's proxies every 0.1 s while a workflow runs, as Prometheus would, and keeps every
    ``producer_ids_held_requests_total`` sample above 0: a user's producer-id counters go with its state (one window
    after its last new id, with its bucket full again: 2 s here), so they are read while they are there."""

    def __init__(self, target: Target) -> None:
        self.target, self.holds = target, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(0.1):
            for proxy in self.target.proxies:
                held = proxy.scraped("kafka_quota_proxy_producer_ids_held_requests_total")
                self.holds += [(labels, n) for labels, n in held.items() if n]

    def __enter__(self) -> HeldWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)


def test_idempotent_and_transactional_producers(target, kafka3):
    """Holds are seen where an operator sees them, on /metrics, while the workflow runs (see HeldWatch)."""
    before = target.throttles()
    with HeldWatch(target) as watch:
        result = exactly_once_workflow(target)
    same_as_direct("exactly-once", target, result, exactly_once_workflow, kafka3)
    check_quotas(target, before, ())
    if target.biting:
        assert watch.holds, f"no new producer id was held through {target.name}"
    else:
        assert not watch.holds, f"new producer ids held under generous quotas through {target.name}"


def admin_workflow(target: Target):
    """Each client's admin creates a topic (kafka-python 3 partitions, aiokafka 2, confluent-kafka 1 with a config),
    CreatePartitions grows two of them, AlterConfigs (kafka-python, the legacy API) and IncrementalAlterConfigs
    (confluent-kafka) set topic configs that DescribeConfigs then shows, records are written and some deleted
    (DeleteRecords), ListOffsets gives the real earliest and latest offsets, DescribeLogDirs shows every replica
    of every partition on its broker, the same size on each, and the topics are deleted."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewTopic as AioTopic
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, NewPartitions
    from confluent_kafka.admin import ConfigResource as CkResource
    from confluent_kafka.admin import NewTopic as CkTopic
    from kafka import TopicPartition
    from kafka.admin import ConfigResource

    kp_topic, aio_topic, ck_topic = (unique_topic(f"wf-admin-{n}") for n in ("kp", "aio", "ck"))
    kp = kp_admin(target.bootstrap)
    ck = AdminClient({"bootstrap.servers": target.bootstrap, "client.id": "wf-ck-admin"})
    try:
        retry(lambda: kp.create_topics({kp_topic: {"num_partitions": 3, "replication_factor": 3}}))

        async def aio_create():
            admin = AIOKafkaAdminClient(bootstrap_servers=target.bootstrap, client_id="wf-aio-admin")
            await admin.start()
            try:
                response = await admin.create_topics([AioTopic(aio_topic, 2, 3)])
            finally:
                await admin.close()
            for _name, code, message in response.topic_errors:
                if code == 89:
                    raise RuntimeError(f"THROTTLING_QUOTA_EXCEEDED: {message}")
                assert code == 0, (code, message)

        retry(lambda: asyncio.run(aio_create()))

        def ck_call(futures):
            for future in futures.values():
                future.result(30)

        retry(
            lambda: ck_call(
                ck.create_topics(
                    [
                        CkTopic(
                            ck_topic,
                            1,
                            3,
                            config={"retention.ms": "86400000"},
                        )
                    ]
                )
            )
        )
        retry(lambda: kp.create_partitions({kp_topic: 5}))
        retry(lambda: ck_call(ck.create_partitions([NewPartitions(aio_topic, 3)])))
        sizes = {kp_topic: 5, aio_topic: 3, ck_topic: 1}
        for topic, count in sizes.items():
            wait_until(lambda: _leaders_known(kp, topic, count), 30, f"{topic}'s {count} partitions")

        kp.alter_configs([ConfigResource("TOPIC", kp_topic, {"retention.ms": "3600000"})], incremental=False)
        ck_call(
            ck.incremental_alter_configs(
                [
                    CkResource(
                        "TOPIC",
                        kp_topic,
                        incremental_configs=[
                            ConfigEntry("segment.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
                            ConfigEntry("retention.ms", "1800000", incremental_operation=AlterConfigOpType.SET),
                        ],
                    )
                ]
            )
        )
        ck_call(
            ck.incremental_alter_configs(
                [
                    CkResource(
                        "TOPIC",
                        ck_topic,
                        incremental_configs=[
                            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)
                        ],
                    )
                ]
            )
        )
        wanted = {
            kp_topic: {"retention.ms": "1800000", "segment.ms": "7200000"},
            ck_topic: {"retention.ms": "604800000"},
        }

        def configs():
            got = {}
            for resource, future in ck.describe_configs([CkResource("TOPIC", t) for t in wanted]).items():
                entries = future.result(30)
                got[resource.name] = {k: entries[k].value for k in wanted[resource.name]}
            return got == wanted and got

        described = wait_until(configs, 30, "the altered configs described")

        c.ck_produce(target.bootstrap, kp_topic, 0, records=values("admin", 100))
        before = end_offsets(target.bootstrap, kp_topic, 5)
        assert before["earliest"] == [0] * 5 and sum(before["latest"]) == 100
        cut = {TopicPartition(kp_topic, p): end // 2 for p, end in enumerate(before["latest"]) if end}
        kp.delete_records(cut)
        after = end_offsets(target.bootstrap, kp_topic, 5)
        assert after["latest"] == before["latest"]
        assert after["earliest"] == [cut.get(TopicPartition(kp_topic, p), 0) for p in range(5)]

        def log_dirs():
            replicas = defaultdict(dict)  # partition -> broker -> size
            for broker in kp.describe_log_dirs([kp_topic]):
                for log_dir in broker["log_dirs"]:
                    for topic in log_dir["topics"]:
                        for part in topic["partitions"]:
                            replicas[part["partition_index"]][broker["broker"]] = part["partition_size"]
            complete = len(replicas) == 5 and all(
                len(sizes) == 3 and len(set(sizes.values())) == 1 for sizes in replicas.values()
            )
            return complete and {p: next(iter(s.values())) > 0 for p, s in replicas.items()}

        dirs = wait_until(log_dirs, 30, "every replica in DescribeLogDirs, the same size on each broker")
        assert dirs == {p: end > 0 for p, end in enumerate(before["latest"])}
        counts = {t: len(kp.describe_topics([t])[0]["partitions"]) for t in sizes}
        assert counts == sizes
    finally:
        kp.close()
        ck = None  # its last reference: librdkafka's admin handle destroyed before the topics are deleted
    delete_topics(target.bootstrap, kp_topic, aio_topic, ck_topic)
    return {"configs": list(described.values()), "before": before, "after": after, "counts": list(counts.values())}


def test_admin_operations(target, kafka3):
    before = target.throttles()
    result = admin_workflow(target)
    same_as_direct("admin", target, result, admin_workflow, kafka3)
    check_quotas(target, before, ("controller_mutation_rate",))
