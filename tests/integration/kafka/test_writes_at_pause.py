"""What reaches a Kafka broker's disk through a proxy at PAUSE (issue 44, T3), and what still works there.

Offset commits with metadata. The attack: OffsetCommit v2 of a standalone group (no membership), 50 partitions of 4,000 characters of metadata
each (200 kB a request), pipelined on 4 connections, through a proxy whose volume is at its hard limit, under a
100 kB/s ``producer_byte_rate``. Before, neither PAUSE nor any quota applied: 151.5 MB/s of commits acknowledged and
``__consumer_offsets`` grew 781 MB on the broker's disk while every Produce was refused. Now at PAUSE metadata is
refused (OFFSET_METADATA_TOO_LARGE, the proxy's bound being 0 there) and never reaches the broker, and the offsets
alone are still committed (consumers keep their place), charged against the client's quota.

A group's record (its members' JoinGroup metadata and the leader's SyncGroup assignments, written by the coordinator
to ``__consumer_offsets``): a consumer group still joins and rebalances at PAUSE with a real client, while a member
whose metadata or assignment is over ``volume_usage.paused_group_metadata_max_bytes`` is refused
(COORDINATOR_NOT_AVAILABLE, retriable), counted, and never reaches the coordinator.

The group heartbeats of KIP-848, KIP-932 and KIP-1071 (each served by Apache Kafka 4.4 by default: group.version 1,
share.version 2, streams.version 1): a member's record and a Streams group's topology are bounded the same way.
Transactions cannot grow at PAUSE: a new transactional id is not initialised, a known one is (and fences its old
instance), but its partitions never join its transaction, its commit times out with a retriable error, and nothing
reaches the topic or the transaction's state.

One sidecar in front of kafka1 for the module, put at PAUSE with the broker's real log dirs (``source:
describe_log_dirs``) and a hard limit above the free space there is.
"""

from __future__ import annotations

import socket
import struct
import threading
import uuid
import warnings

import pytest
from kafka.admin import NewTopic
from kafka.errors import CoordinatorLoadInProgressError, CoordinatorNotAvailableError, NotCoordinatorError
from kafka.structs import TopicPartition

from proxy.codec.apis import (
    CONSUMER_GROUP_HEARTBEAT,
    INIT_PRODUCER_ID,
    JOIN_GROUP,
    OFFSET_COMMIT,
    SHARE_GROUP_HEARTBEAT,
    STREAMS_GROUP_HEARTBEAT,
    SYNC_GROUP,
)
from proxy.codec.apis import METADATA as METADATA_API
from proxy.codec.error_codes import COORDINATOR_NOT_AVAILABLE, ERROR_CODES, NONE, OFFSET_METADATA_TOO_LARGE
from proxy.codec.header import encode_request_header, frame
from proxy.codec.messages import decode_response, encode_request, new_request
from tests.harness import start_proxy, wait_until
from tests.integration.kafka.quotas_common import configs, delete_topics, direct_admin, end_offsets, topics
from tests.integration.raw import asked, connect, exchange, heartbeat_until_answered, read_frame, streams_join
from tests.kafka_cluster import TOPICS, unique_topic

PARTITIONS = 50
METADATA = 4_000
CONNECTIONS = 4
REQUESTS = 25  # per connection: 4 x 25 x 200 kB = 20 MB of metadata offered, as fast as the proxy reads
ATTACK_SECONDS = 3.0
VERSION = 2
LEAVE_GROUP = 13


def commit_frame(group: str, topic: str, n: int, metadata: str | None) -> bytes:
    request = new_request(
        OFFSET_COMMIT,
        VERSION,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        retention_time_ms=-1,
        topics=[
            {
                "name": topic,
                "partitions": [
                    {"partition_index": p, "committed_offset": 42, "committed_metadata": metadata}
                    for p in range(PARTITIONS)
                ],
            }
        ],
    )
    return frame(
        encode_request_header(OFFSET_COMMIT, VERSION, n, "committer") + encode_request(OFFSET_COMMIT, VERSION, request)
    )


def attack(port: int, group: str, topic: str, codes: list, lock: threading.Lock, stop: threading.Event) -> None:
    """REQUESTS commits pipelined (sent as fast as the proxy reads them) until ``stop``; each answered partition's
    error code kept."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)

    def send() -> None:
        try:
            sock.sendall(b"".join(commit_frame(group, topic, n, "m" * METADATA) for n in range(REQUESTS)))
        except OSError:
            pass  # closed at the end, the client muted mid-way

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    sock.settimeout(0.5)
    try:
        for _ in range(REQUESTS):
            while True:
                try:
                    answer = decode_response(OFFSET_COMMIT, VERSION, read_frame(sock)[4:])  # header v0
                    break
                except TimeoutError:
                    if stop.is_set():
                        return
            with lock:
                codes.extend(p.error_code for t in answer.topics for p in t.partitions)
    finally:
        sock.close()


def committed(admin, group: str) -> dict:
    """The group's committed offsets on the broker, asked directly (the first group on a fresh cluster waits for
    __consumer_offsets to be created: COORDINATOR_NOT_AVAILABLE until then)."""
    found: list = []

    def ask() -> bool:
        try:
            found.append(admin.list_group_offsets(group).get(group, {}))
            return True
        except (CoordinatorNotAvailableError, CoordinatorLoadInProgressError, NotCoordinatorError):
            return False

    wait_until(ask, 60, f"the coordinator of {group}")
    return found[-1]


@pytest.fixture(scope="module")
def paused(kafka1):
    """A sidecar in front of kafka1 whose volume is at PAUSE, from the broker's own log dirs."""
    quotas = [
        {"entity": {"client-id": "committer"}, "producer_byte_rate": 100_000},
        {"entity": {"client-id": "raw-test"}, "controller_mutation_rate": 100},  # what a Streams topology creates
    ]
    config = configs(kafka1, quotas)[0]
    config["volume_usage"] = {
        "source": "describe_log_dirs",
        "freshness_seconds": 10,
        "missing_data_action": "PAUSE",
        "describe_log_dirs": {
            "interval_seconds": 1,
            "soft_limit": {"type": "MinFreeBytes", "level": 2**62},
            "hard_limit": {"type": "MinFreeBytes", "level": 2**62},
        },
    }
    proxy = start_proxy(config)
    try:
        wait_until(
            lambda: proxy.metric("kafka_quota_proxy_volume_state", state="PAUSE") == 1,
            20,
            "the volume at PAUSE from the broker's own log dirs",
        )
        yield proxy
    finally:
        proxy.stop()


def refused(proxy, api: str) -> float:
    return proxy.metric("kafka_quota_proxy_volume_refused_writes_total", api=api)


def mutations(proxy, client_id: str) -> float:
    """Partition mutations charged to ``client_id``'s controller_mutation_rate (a client-id entity: no user)."""
    return proxy.metric("kafka_quota_proxy_controller_mutations_total", user="", client_id=client_id)


@pytest.mark.long_running(seconds=15)
def test_commits_with_metadata_reach_no_disk_at_pause_and_plain_commits_go_on(kafka1, paused):
    proxy = paused
    group = unique_topic("t3-group")
    with topics(kafka1, "t3", partitions=PARTITIONS) as (topic,):
        admin = direct_admin(kafka1)
        assert committed(admin, group) == {}  # the group's coordinator is ready: commits are taken
        before = refused(proxy, "OffsetCommit")
        codes: list[int] = []
        lock = threading.Lock()
        stop = threading.Event()
        threads = [
            threading.Thread(target=attack, args=(proxy.port, group, topic, codes, lock, stop))
            for _ in range(CONNECTIONS)
        ]
        for t in threads:
            t.start()
        wait_until(lambda: len(codes) >= 10 * PARTITIONS, 60, "ten commits answered")
        stop.wait(ATTACK_SECONDS)  # then as many as the quota lets through in that time
        stop.set()
        for t in threads:
            t.join(30)
        accepted = sum(1 for code in codes if code == NONE) * METADATA
        print(
            f"\nT3 at PAUSE: {len(codes):,} partition commits answered, {METADATA:,} characters of metadata "
            f"each; metadata bytes accepted {accepted:,}",
            flush=True,
        )
        assert set(codes) == {OFFSET_METADATA_TOO_LARGE}, f"accepted {accepted:,} bytes of metadata"
        assert refused(proxy, "OffsetCommit") - before == len(codes) // PARTITIONS  # every request counted
        try:
            assert committed(admin, group) == {}  # nothing of it on the broker
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=60) as sock:  # offsets alone: kept
                sock.sendall(commit_frame(group, topic, 1, None))
                answer = decode_response(OFFSET_COMMIT, VERSION, read_frame(sock)[4:])
            assert {p.error_code for t in answer.topics for p in t.partitions} == {NONE}
            assert {tp: (o.offset, o.metadata) for tp, o in committed(admin, group).items()} == {
                TopicPartition(topic, p): (42, "") for p in range(PARTITIONS)
            }
        finally:
            admin.delete_groups([group])
            admin.close()


MADE_UP = [f"made-up-{i:05d}-" + "n" * 200 for i in range(400)]  # 84 kB of topic names


def consumer(proxy, group: str, topic: str, n: int):
    """A confluent-kafka (librdkafka) group member, the classic protocol. Not kafka-python: its 3.0.12 drops a join
    that completes after a poll's timeout when it led the group (the leader's assignment already matches its
    metadata, so the next poll sees no rejoin needed and never finishes the join: no partitions, no heartbeats, the
    coordinator evicts it). Seen here with 100 ms polls, 1 run in 4 alone, with nothing refused."""
    from confluent_kafka import Consumer

    member = Consumer(
        {
            "bootstrap.servers": proxy.bootstrap,
            "group.id": group,
            "client.id": f"pause-member-{n}",
            "enable.auto.commit": False,
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 300,
        }
    )
    member.subscribe([topic])
    return member


def assigned(consumers: list, each: int) -> bool:
    for c in consumers:
        c.poll(0.1)
    return all(len(c.assignment()) == each for c in consumers)


@pytest.mark.long_running(seconds=10)
def test_a_consumer_group_joins_and_rebalances_at_pause(kafka1, paused):
    """Group members (JoinGroup, SyncGroup, Heartbeat through the paused sidecar): the first gets every
    partition, a second joins and the group rebalances to two each; the coordinator holds the group Stable."""
    group = unique_topic("pause-group")
    before = refused(paused, "JoinGroup") + refused(paused, "SyncGroup")
    with topics(kafka1, "pause-group", partitions=4) as (topic,):
        members = [consumer(paused, group, topic, 1)]
        admin = direct_admin(kafka1)
        try:
            wait_until(lambda: assigned(members, 4), 60, "the first member assigned every partition at PAUSE")
            members.append(consumer(paused, group, topic, 2))
            wait_until(lambda: assigned(members, 2), 60, "the group rebalanced to two members at PAUSE")
            state, held = described(admin, group)
            assert state == "Stable" and len(held) == 2
            assert refused(paused, "JoinGroup") + refused(paused, "SyncGroup") == before
        finally:
            for c in members:
                c.close()
            wait_until(lambda: _deleted(admin, group), 30, f"group {group} deleted")
            admin.close()


@pytest.mark.long_running(seconds=8)
def test_group_metadata_over_the_bound_never_reaches_the_coordinator_at_pause(kafka1, paused):
    """A member's 1 MB JoinGroup metadata, then a leader's 1 MB assignment: each refused COORDINATOR_NOT_AVAILABLE
    and counted, and nothing of either is in the group the coordinator holds; the same member with ordinary sizes
    completes its generation."""
    group = unique_topic("pause-huge")
    huge = b"x" * 1_000_000
    join = dict(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, protocol_type="consumer")
    admin = direct_admin(kafka1)
    sock = connect(paused.port)
    sock.settimeout(60)
    member = ""
    try:
        joined = refused(paused, "JoinGroup")
        answer = exchange(sock, JOIN_GROUP, 5, 1, member_id="", protocols=[{"name": "range", "metadata": huge}], **join)
        assert answer.error_code == COORDINATOR_NOT_AVAILABLE
        assert refused(paused, "JoinGroup") == joined + 1
        assert described(admin, group)[1] == []  # the coordinator never saw it
        # ordinary metadata joins (v5: the first answer gives the member its id, the second joins with it)
        ordinary = [{"name": "range", "metadata": b"\x00\x00" + bytes(30)}]
        first = exchange(sock, JOIN_GROUP, 5, 2, member_id="", protocols=ordinary, **join)
        member = first.member_id
        if first.error_code == ERROR_CODES["MEMBER_ID_REQUIRED"]:
            first = exchange(sock, JOIN_GROUP, 5, 3, member_id=member, protocols=ordinary, **join)
        assert first.error_code == NONE and first.leader == member
        synced = refused(paused, "SyncGroup")
        sync = dict(group_id=group, generation_id=first.generation_id, member_id=member)
        answer = exchange(sock, SYNC_GROUP, 3, 4, assignments=[{"member_id": member, "assignment": huge}], **sync)
        assert answer.error_code == COORDINATOR_NOT_AVAILABLE
        assert refused(paused, "SyncGroup") == synced + 1
        assert described(admin, group)[0] == "CompletingRebalance"  # no assignment stored: not complete
        assignment = b"\x00\x00" + bytes(20)
        answer = exchange(sock, SYNC_GROUP, 3, 5, assignments=[{"member_id": member, "assignment": assignment}], **sync)
        assert (answer.error_code, answer.assignment) == (NONE, assignment)
        state, held = described(admin, group)
        assert state == "Stable" and len(held) == 1
    finally:
        leave(sock, group, member)
        sock.close()
        wait_until(lambda: _deleted(admin, group), 30, f"group {group} deleted")
        admin.close()


def leave(sock: socket.socket, group: str, member: str) -> None:
    """LeaveGroup v0 (the proxy's codec does not carry it: it passes through as opaque bytes)."""
    if not member:
        return
    body = b"".join(struct.pack(">h", len(s)) + s.encode() for s in (group, member))
    sock.sendall(frame(encode_request_header(LEAVE_GROUP, 0, 9, "raw-test") + body))
    read_frame(sock)


def described(admin, group: str) -> tuple[str, list]:
    """The group's state and members as its coordinator holds them, asked directly."""
    found = admin.describe_groups([group])[group]
    return found["group_state"], found["members"]


def _deleted(admin, group: str) -> bool:
    """The group deleted (NON_EMPTY_GROUP until its member has left)."""
    return admin.delete_groups([group])[group] in ("OK", "GroupIdNotFoundError")


@pytest.mark.long_running(seconds=8)
def test_a_kip848_consumer_joins_at_pause_and_a_huge_subscription_is_refused(kafka1, paused):
    """A librdkafka consumer of the new protocol (``group.protocol: consumer``, ConsumerGroupHeartbeat) is assigned
    its partitions through the paused sidecar; a heartbeat subscribing to 84 kB of made-up topic names, which the
    coordinator would keep in the member's record, is refused COORDINATOR_NOT_AVAILABLE and counted."""
    from confluent_kafka import Consumer

    group = unique_topic("pause-848")
    before = refused(paused, "ConsumerGroupHeartbeat")
    with topics(kafka1, "pause-848", partitions=3) as (topic,):
        member = Consumer({"bootstrap.servers": paused.bootstrap, "group.id": group, "group.protocol": "consumer"})
        try:
            member.subscribe([topic])

            def assigned() -> bool:
                member.poll(0.1)
                return len(member.assignment()) == 3

            wait_until(assigned, 60, "the KIP-848 member assigned every partition at PAUSE")
            assert refused(paused, "ConsumerGroupHeartbeat") == before
        finally:
            member.close()
        answer = asked(
            paused.port,
            CONSUMER_GROUP_HEARTBEAT,
            0,
            group_id=unique_topic("pause-848-huge"),
            member_id=str(uuid.uuid4()),
            member_epoch=0,
            rebalance_timeout_ms=30_000,
            subscribed_topic_names=MADE_UP,
            topic_partitions=[],
        )
        assert answer.error_code == COORDINATOR_NOT_AVAILABLE
        assert refused(paused, "ConsumerGroupHeartbeat") == before + 1
        admin = direct_admin(kafka1)
        try:
            wait_until(lambda: _deleted(admin, group), 30, f"group {group} deleted")
        finally:
            admin.close()


@pytest.mark.long_running(seconds=3)
def test_share_and_streams_members_join_at_pause_and_huge_records_are_refused(kafka1, paused):
    """Apache Kafka 4.4 serves share groups (KIP-932) and Streams groups (KIP-1071) by default. Through the paused
    sidecar a share member subscribing to a topic, and a Streams member joining with a topology whose changelog
    topic exists, are answered by the coordinator (a member epoch given); a share member subscribing to 84 kB of
    made-up names, and a Streams member whose topology carries 80 kB of topic configs (its changelog topic's, which
    the coordinator would keep in the group's record), are refused COORDINATOR_NOT_AVAILABLE by the proxy and
    counted. A Streams member whose changelog topic is missing is refused too (the broker would create it: no
    partition is added at PAUSE), counted, and the topic is not created; none is charged to controller_mutation_rate
    (the creation's charge on an open volume: tests/integration/kafka/test_quotas_mutation.py)."""
    share, streams = refused(paused, "ShareGroupHeartbeat"), refused(paused, "StreamsGroupHeartbeat")
    with topics(kafka1, "pause-share", partitions=3) as (topic,):
        member = str(uuid.uuid4())
        group = unique_topic("pause-share-group")
        admin = direct_admin(kafka1)
        try:
            committed(admin, group)  # FindCoordinator, as a client's first step: __consumer_offsets made and loaded
        finally:
            admin.close()
        joined = heartbeat_until_answered(
            paused.port, SHARE_GROUP_HEARTBEAT, 1, group_id=group, member_id=member, subscribed_topic_names=[topic]
        )
        assert joined.error_code == NONE and joined.member_epoch > 0
        left = heartbeat_until_answered(
            paused.port, SHARE_GROUP_HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=-1
        )
        assert left.error_code == NONE
        answer = asked(
            paused.port,
            SHARE_GROUP_HEARTBEAT,
            1,
            group_id=group,
            member_id=str(uuid.uuid4()),
            subscribed_topic_names=MADE_UP,
        )
        assert answer.error_code == COORDINATOR_NOT_AVAILABLE
        assert refused(paused, "ShareGroupHeartbeat") == share + 1

        group, member = unique_topic("pause-streams"), str(uuid.uuid4())
        changelog = [{"key": "cleanup.policy", "value": "compact"}]  # the store's changelog: the coordinator creates it
        charged = mutations(paused, "raw-test")
        missing = asked(paused.port, STREAMS_GROUP_HEARTBEAT, 1, **streams_join(group, member, topic, changelog))
        assert missing.error_code == COORDINATOR_NOT_AVAILABLE and "hard limit" in missing.error_message
        assert refused(paused, "StreamsGroupHeartbeat") == streams + 1
        direct = direct_admin(kafka1)
        try:
            assert f"{group}-store-changelog" not in direct.list_topics()
            direct.create_topics(
                [NewTopic(f"{group}-store-changelog", 3, 1, topic_configs={"cleanup.policy": "compact"})]
            )
        finally:
            direct.close()
        try:
            joined = heartbeat_until_answered(
                paused.port, STREAMS_GROUP_HEARTBEAT, 1, **streams_join(group, member, topic, changelog)
            )
            assert joined.error_code == NONE and joined.member_epoch > 0, joined
            assert mutations(paused, "raw-test") == charged  # its topics exist: nothing created, nothing charged
        finally:
            delete_topics(kafka1, [f"{group}-store-changelog"])
        left = heartbeat_until_answered(
            paused.port, STREAMS_GROUP_HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=-1
        )
        assert left.error_code == NONE
        configs = [{"key": f"config.{i}", "value": "v" * 120} for i in range(600)]
        fields = streams_join(unique_topic("pause-streams-huge"), str(uuid.uuid4()), topic, configs)
        assert asked(paused.port, STREAMS_GROUP_HEARTBEAT, 1, **fields).error_code == COORDINATOR_NOT_AVAILABLE
        assert refused(paused, "StreamsGroupHeartbeat") == streams + 2


COMMIT_TIMEOUT_S = 2.5  # long enough for the first AddPartitionsToTxn and its retry after the 1 s pause


@pytest.mark.long_running(seconds=4)
def test_a_transactional_producer_at_pause_is_told_to_retry_and_nothing_reaches_the_log(kafka1, paused):
    """A transactional id new to its coordinator cannot be initialised at PAUSE (a new key in __transaction_state):
    InitProducerId is answered COORDINATOR_NOT_AVAILABLE, retriable, and counted. A known one can: an application
    restarted at PAUSE (a librdkafka transactional producer at its default settings, its id initialised before,
    straight at the broker) gets its producer id through the paused sidecar, fencing its old instance. But no
    partition joins its transaction (AddPartitionsToTxn answered COORDINATOR_NOT_AVAILABLE, counted, and retried by
    the client), so its commit fails with a retriable error after its timeout, what the application retries (or
    aborts) until the PAUSE ends. The coordinator holds the transaction Empty, with no partition, and the topic has
    neither a record nor a transaction marker."""
    from confluent_kafka import KafkaException, Producer

    transactional_id = unique_topic("pause-txn")
    before = refused(paused, "AddPartitionsToTxn") + refused(paused, "Produce")
    with topics(kafka1, "pause-txn", partitions=3) as (topic,):
        first = Producer({"bootstrap.servers": kafka1.direct_bootstrap, "transactional.id": transactional_id})
        first.init_transactions(60)  # the id's coordinator made and loaded, the id known to it
        new = refused(paused, "InitProducerId")
        fields = dict(transactional_id=unique_topic("pause-txn-new"), transaction_timeout_ms=60_000)
        answer = asked(paused.port, INIT_PRODUCER_ID, 4, **fields)
        assert (answer.error_code, answer.producer_id) == (COORDINATOR_NOT_AVAILABLE, -1)
        assert answer.throttle_time_ms >= 1000  # the pause_delay_ms
        assert refused(paused, "InitProducerId") == new + 1
        producer = Producer({"bootstrap.servers": paused.bootstrap, "transactional.id": transactional_id})
        producer.init_transactions(60)  # the known id re-initialised: the first instance is fenced
        assert refused(paused, "InitProducerId") == new + 1
        producer.begin_transaction()
        for n in range(30):
            producer.produce(topic, value=f"txn-{n}".encode(), partition=n % 3)
        with pytest.raises(KafkaException) as failed:
            producer.commit_transaction(COMMIT_TIMEOUT_S)
        error = failed.value.args[0]
        counted = refused(paused, "AddPartitionsToTxn") + refused(paused, "Produce") - before
        print(
            f"\ncommit at PAUSE: {error.name()} ({error.str()}), retriable {error.retriable()}; {counted:g} "
            f"requests refused",
            flush=True,
        )
        assert error.retriable() and not error.fatal()
        assert counted > 0  # AddPartitionsToTxn from librdkafka (a KIP-890 client's Produce would be refused instead)
        admin = direct_admin(kafka1)
        try:
            held = admin.describe_transactions([transactional_id])[transactional_id]
        finally:
            admin.close()
        assert held.topic_partitions == set(), held
        assert held.state.name == "EMPTY", held
        producer.purge()
        with warnings.catch_warnings():  # its close aborts what it can: nothing here, the commit still under way
            warnings.simplefilter("ignore", RuntimeWarning)
            producer.close()
            first.close()  # fenced
        assert end_offsets(kafka1, topic) == 0  # no record, no marker


def test_no_partition_is_added_at_pause_and_validation_goes_on(kafka1, paused):
    """kafka-topics --create (Java's TopicCommand, which does not retry a quota violation) through the paused sidecar
    fails at once with the proxy's message, and the topic does not exist on the broker; kafka-python's admin client
    is refused the partitions it adds to an existing topic (THROTTLING_QUOTA_EXCEEDED, strict versions) and its
    count stays; a validate_only create is validated by Kafka itself (an invalid one gets Kafka's own error) and
    creates nothing. Each refusal is counted. A Metadata naming a new topic with allow_auto_topic_creation, which
    Kafka (auto.create.topics.enable, its default) would create, is answered UNKNOWN_TOPIC_OR_PARTITION."""
    from kafka.admin import KafkaAdminClient, NewPartitions
    from kafka.errors import InvalidReplicationFactorError, ThrottlingQuotaExceededError

    new = unique_topic("pause-create")
    before = refused(paused, "CreateTopics"), refused(paused, "CreatePartitions")
    auto = asked(paused.port, METADATA_API, 12, topics=[{"name": new}], allow_auto_topic_creation=True)
    assert [(t.name, t.error_code) for t in auto.topics] == [(new, ERROR_CODES["UNKNOWN_TOPIC_OR_PARTITION"])]
    created = kafka1.tool(
        TOPICS, "--bootstrap-server", paused.bootstrap, "--create", "--topic", new, "--partitions", "3", check=False
    )
    assert created.returncode != 0 and "a broker volume is at its hard limit" in created.stdout + created.stderr
    with topics(kafka1, "pause-grow", partitions=2) as (existing,):
        admin = KafkaAdminClient(bootstrap_servers=paused.bootstrap, request_timeout_ms=30_000)
        try:
            admin.create_topics([NewTopic(new, 3, 1)], validate_only=True)  # validated, not created
            with pytest.raises(InvalidReplicationFactorError):  # Kafka's own answer: one broker
                admin.create_topics([NewTopic(new, 3, 3)], validate_only=True)
            with pytest.raises(ThrottlingQuotaExceededError):  # last: kafka-python then waits out the throttle
                admin.create_partitions({existing: NewPartitions(4)})
        finally:
            admin.close()
        direct = direct_admin(kafka1)
        try:
            assert new not in direct.list_topics()
            assert len(direct.describe_topics([existing])[0]["partitions"]) == 2
        finally:
            direct.close()
    assert (refused(paused, "CreateTopics"), refused(paused, "CreatePartitions")) == (before[0] + 1, before[1] + 1)
