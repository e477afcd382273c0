"""What reaches a Kafka broker's disk through a proxy at PAUSE (issue 44, T3): offset commits with metadata.

The attack: OffsetCommit v2 of a standalone group (no membership), 50 partitions of 4,000 characters of metadata
each (200 kB a request), pipelined on 4 connections, through a proxy whose volume is at its hard limit, under a
100 kB/s ``producer_byte_rate``. Before, neither PAUSE nor any quota applied: 151.5 MB/s of commits acknowledged and
``__consumer_offsets`` grew 781 MB on the broker's disk while every Produce was refused. Now at PAUSE metadata is
refused (OFFSET_METADATA_TOO_LARGE, the proxy's bound being 0 there) and never reaches the broker, and the offsets
alone are still committed (consumers keep their place), charged against the client's quota.

The volume is put at PAUSE with the brokers' real log dirs (``source: describe_log_dirs``) and a hard limit above
the free space there is.
"""

from __future__ import annotations

import socket
import threading

import pytest
from kafka.errors import CoordinatorLoadInProgressError, CoordinatorNotAvailableError, NotCoordinatorError
from kafka.structs import TopicPartition

from proxy.codec.apis import OFFSET_COMMIT
from proxy.codec.error_codes import NONE, OFFSET_METADATA_TOO_LARGE
from proxy.codec.header import encode_request_header, frame
from proxy.codec.messages import decode_response, encode_request, new_request
from tests.harness import start_proxy, wait_until
from tests.integration.kafka.quotas_common import direct_admin, topics
from tests.integration.raw import read_frame
from tests.kafka_cluster import unique_topic

PARTITIONS = 50
METADATA = 4_000
CONNECTIONS = 4
REQUESTS = 25  # per connection: 4 x 25 x 200 kB = 20 MB of metadata offered, as fast as the proxy reads
ATTACK_SECONDS = 3.0
VERSION = 2


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


@pytest.mark.long_running(seconds=15)
def test_commits_with_metadata_reach_no_disk_at_pause_and_plain_commits_go_on(kafka1):
    config = {
        "upstream": {"bootstrap_servers": [kafka1.direct_bootstrap]},
        "listeners": [{"name": "PLAINTEXT", "bind": "127.0.0.1:0"}],
        "metrics": {"bind": "127.0.0.1:0"},
        "quotas": [{"entity": {"client-id": "committer"}, "producer_byte_rate": 100_000}],
        "volume_usage": {
            "source": "describe_log_dirs",
            "freshness_seconds": 10,
            "missing_data_action": "PAUSE",
            "describe_log_dirs": {
                "interval_seconds": 1,
                "soft_limit": {"type": "MinFreeBytes", "level": 2**62},
                "hard_limit": {"type": "MinFreeBytes", "level": 2**62},
            },
        },
    }
    group = unique_topic("t3-group")
    with topics(kafka1, "t3", partitions=PARTITIONS) as (topic,):
        proxy = start_proxy(config)
        try:
            wait_until(
                lambda: proxy.metric("kafka_quota_proxy_volume_state", state="PAUSE") == 1,
                20,
                "the volume at PAUSE from the brokers' own log dirs",
            )
            admin = direct_admin(kafka1)
            assert committed(admin, group) == {}  # the group's coordinator is ready: commits are taken
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
        finally:
            proxy.stop()
