"""The cases of bench/evasion.py: one quota configuration and one tenant each, grouped by quota (bytes, fetch,
mutations, pids, connections, volume), numbered as docs/evasion.md numbers them."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.evasion_tenants import (  # noqa: E402
    BYTE_QUOTA,
    CONNECTION_RATE,
    MIB,
    MUTATION_RATE,
    PID_RATE,
    PID_WINDOW_S,
    TANSU_NODE_ID,
    Proxied,
    Tally,
    connection_storm,
    consumer,
    producer,
    restart_loop,
    rotating,
    same,
    topic_creator,
)
from bench.kafka_requests import at_broker, create_topics_body, produce_body  # noqa: E402
from proxy.codec.apis import CREATE_TOPICS, PRODUCE  # noqa: E402
from quota.managers.volume import Limit, Snapshot, Volume  # noqa: E402

VOLUME_TOPIC = "__kafka_quota_proxy_volume_usage"
VOLUME_YAML = f"volume_usage: {{source: topic, produce_base_rate: {2 * BYTE_QUOTA}, pause_delay_ms: 200}}"


def under_disk_pressure(used_percent: int, run_tenant: Callable[[Proxied, float], Tally]):
    """Publish one snapshot of Tansu's disk at ``used_percent`` (soft limit 50 %, hard 90 %: 70 % scales produce
    quotas by 0.5, 95 % pauses produce), as a sidecar would, wait for the proxy to take it, then run the tenant."""

    def run(proxy: Proxied, seconds: float) -> Tally:
        snapshot = Snapshot(
            TANSU_NODE_ID,
            int(time.time() * 1000),
            Limit("MinFreePercentage", 50),
            Limit("MinFreePercentage", 10),
            (Volume("/disk", 100 * 10**9, used_percent * 10**9),),
        )
        at_broker(
            proxy.broker_port,
            [
                (CREATE_TOPICS, 7, create_topics_body(7, VOLUME_TOPIC)),
                (PRODUCE, 7, produce_body(VOLUME_TOPIC, snapshot.to_json(), str(TANSU_NODE_ID).encode())),
            ],
        )
        expected = "PAUSE" if used_percent >= 90 else "THROTTLE"
        deadline = time.monotonic() + 20
        while proxy.metric("kafka_quota_proxy_volume_state", state=expected) != 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        return run_tenant(proxy, seconds)

    return run


# -- the cases ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    group: str
    what: str
    quotas: list[str]
    quota: float  # the rate the tenant is held to, per second
    unit: str
    run: Callable[[Proxied, float], Tally]
    settings: dict | None = None
    extra_yaml: str = ""


def entry(entity: str, key: str, value: float) -> str:
    name, _, value_of = entity.partition(":")
    return f"{{entity: {{{name}: '{value_of}'}}, {key}: {value}}}"


CLIENT_BYTES = entry("client-id:<default>", "producer_byte_rate", BYTE_QUOTA)
USER_BYTES = entry("user:<default>", "producer_byte_rate", BYTE_QUOTA)
CLIENT_FETCH = entry("client-id:<default>", "consumer_byte_rate", BYTE_QUOTA)
IP_RATE = entry("ip:<default>", "connection_creation_rate", CONNECTION_RATE)
CLIENT_MUTATIONS = entry("client-id:<default>", "controller_mutation_rate", MUTATION_RATE)
USER_MUTATIONS = entry("user:<default>", "controller_mutation_rate", MUTATION_RATE)
USER_PIDS = entry("user:<default>", "producer_ids_rate", PID_RATE)
USER_VOLUME_BYTES = entry("user:<default>", "producer_byte_rate", 2 * BYTE_QUOTA)
FRESH = 4  # concurrent loops of a tenant opening a new connection per request
PER_IP = 8  # max.connections.per.ip where set: muted connections count until their mute ends
B, PIDS = "B", "producer ids"
IP = f"ip connection_creation_rate {CONNECTION_RATE}/s"

CASES = [
    Case(
        "bytes",
        "1. polite: one connection, one client id (client-id producer_byte_rate)",
        [CLIENT_BYTES],
        BYTE_QUOTA,
        B,
        producer(1, False, same("tenant")),
    ),
    Case(
        "bytes",
        "2a. a new connection per request, one client id",
        [CLIENT_BYTES],
        BYTE_QUOTA,
        B,
        producer(FRESH, True, same("tenant")),
    ),
    Case(
        "bytes",
        f"2b. the same, with {IP}",
        [CLIENT_BYTES, IP_RATE],
        BYTE_QUOTA,
        B,
        producer(FRESH, True, same("tenant")),
    ),
    Case(
        "bytes",
        f"2c. the same, with {IP}, 1 MiB produces",
        [CLIENT_BYTES, IP_RATE],
        BYTE_QUOTA,
        B,
        producer(FRESH, True, same("tenant"), MIB),
    ),
    Case(
        "bytes",
        f"2d. a new connection per request, max.connections.per.ip {PER_IP}",
        [CLIENT_BYTES],
        BYTE_QUOTA,
        B,
        producer(FRESH, True, same("tenant")),
        {"max.connections.per.ip": PER_IP},
    ),
    Case(
        "bytes",
        "2e. the same, 1 MiB produces",
        [CLIENT_BYTES],
        BYTE_QUOTA,
        B,
        producer(FRESH, True, same("tenant"), MIB),
        {"max.connections.per.ip": PER_IP},
    ),
    Case(
        "bytes",
        "3a. a new client id per request, one connection",
        [CLIENT_BYTES],
        BYTE_QUOTA,
        B,
        producer(1, False, rotating("tenant")),
    ),
    Case(
        "bytes",
        "3b. the same against a user quota (User:ANONYMOUS)",
        [USER_BYTES],
        BYTE_QUOTA,
        B,
        producer(1, False, rotating("tenant")),
    ),
    Case(
        "bytes",
        "3c. a new client id and a new connection per request (user quota)",
        [USER_BYTES],
        BYTE_QUOTA,
        B,
        producer(FRESH, True, rotating("tenant")),
    ),
    Case(
        "bytes",
        f"3d. the same, with {IP}",
        [USER_BYTES, IP_RATE],
        BYTE_QUOTA,
        B,
        producer(FRESH, True, rotating("tenant")),
    ),
    Case(
        "fetch",
        "1f. polite: one connection, one client id (client-id consumer_byte_rate)",
        [CLIENT_FETCH],
        BYTE_QUOTA,
        B,
        consumer(1, False, same("reader")),
    ),
    Case(
        "fetch",
        "2f. a new connection per fetch, one client id",
        [CLIENT_FETCH],
        BYTE_QUOTA,
        B,
        consumer(FRESH, True, same("reader")),
    ),
    Case(
        "fetch",
        f"2g. the same, with {IP}",
        [CLIENT_FETCH, IP_RATE],
        BYTE_QUOTA,
        B,
        consumer(FRESH, True, same("reader")),
    ),
    Case(
        "fetch",
        "3f. a new client id per fetch, one connection",
        [CLIENT_FETCH],
        BYTE_QUOTA,
        B,
        consumer(1, False, rotating("reader")),
    ),
    Case(
        "mutations",
        "4a. CreateTopics v7 (strict), one connection, one client id (client-id quota)",
        [CLIENT_MUTATIONS],
        MUTATION_RATE,
        "partitions",
        topic_creator(1, False, same("admin"), 7),
    ),
    Case(
        "mutations",
        "4b. CreateTopics v7, a new connection per request",
        [CLIENT_MUTATIONS],
        MUTATION_RATE,
        "partitions",
        topic_creator(FRESH, True, same("admin"), 7),
    ),
    Case(
        "mutations",
        "4c. CreateTopics v5 (permissive: admitted, then throttled), a new connection per request",
        [CLIENT_MUTATIONS],
        MUTATION_RATE,
        "partitions",
        topic_creator(FRESH, True, same("admin"), 5),
    ),
    Case(
        "mutations",
        f"4d. the same, with {IP}, 20-partition topics",
        [CLIENT_MUTATIONS, IP_RATE],
        MUTATION_RATE,
        "partitions",
        topic_creator(FRESH, True, same("admin"), 5, 20),
    ),
    Case(
        "mutations",
        "4e. CreateTopics v7, a new client id per request, one connection",
        [CLIENT_MUTATIONS],
        MUTATION_RATE,
        "partitions",
        topic_creator(1, False, rotating("admin"), 7),
    ),
    Case(
        "mutations",
        "4f. the same against a user quota",
        [USER_MUTATIONS],
        MUTATION_RATE,
        "partitions",
        topic_creator(1, False, rotating("admin"), 7),
    ),
    Case(
        "mutations",
        f"4g. CreateTopics v5, a new connection per request, max.connections.per.ip {PER_IP}",
        [CLIENT_MUTATIONS],
        MUTATION_RATE,
        "partitions",
        topic_creator(FRESH, True, same("admin"), 5),
        {"max.connections.per.ip": PER_IP},
    ),
    Case(
        "pids",
        "5a. restart loop: a new idempotent producer per message, 4 threads",
        [USER_PIDS],
        PID_RATE / PID_WINDOW_S,
        PIDS,
        restart_loop(4),
    ),
    Case(
        "pids",
        "5b. the same, with ip connection_creation_rate 1/s",
        [USER_PIDS, entry("ip:<default>", "connection_creation_rate", 1)],
        PID_RATE / PID_WINDOW_S,
        PIDS,
        restart_loop(4),
    ),
    Case(
        "pids",
        f"5c. the same, with max.connections.per.ip {PER_IP}",
        [USER_PIDS],
        PID_RATE / PID_WINDOW_S,
        PIDS,
        restart_loop(4),
        {"max.connections.per.ip": PER_IP},
    ),
    Case(
        "connections",
        f"6a. many connections from one IP ({IP})",
        [IP_RATE],
        CONNECTION_RATE,
        "connections",
        connection_storm(1, 16),
    ),
    Case(
        "connections",
        "6b. the same from 8 IPs (127.0.0.2-9)",
        [IP_RATE],
        CONNECTION_RATE,
        "connections",
        connection_storm(8, 4),
    ),
    Case(
        "connections",
        f"6c. the same, with max.connection.creation.rate {CONNECTION_RATE}",
        [IP_RATE],
        CONNECTION_RATE,
        "connections",
        connection_storm(8, 4),
        {"max.connection.creation.rate": CONNECTION_RATE},
    ),
    Case(
        "volume",
        "7a. disk between soft and hard (x 0.5), one client id, one connection",
        [],
        BYTE_QUOTA,
        B,
        under_disk_pressure(70, producer(1, False, same("tenant"))),
        extra_yaml=VOLUME_YAML,
    ),
    Case(
        "volume",
        "7b. the same, a new client id per request",
        [],
        BYTE_QUOTA,
        B,
        under_disk_pressure(70, producer(1, False, rotating("tenant"))),
        extra_yaml=VOLUME_YAML,
    ),
    Case(
        "volume",
        "7c. the same with a user producer_byte_rate (scaled)",
        [USER_VOLUME_BYTES],
        BYTE_QUOTA,
        B,
        under_disk_pressure(70, producer(1, False, rotating("tenant"))),
        extra_yaml=VOLUME_YAML,
    ),
    Case(
        "volume",
        "7d. disk past the hard limit (PAUSE): new client id and connection per request",
        [],
        BYTE_QUOTA,
        B,
        under_disk_pressure(95, producer(FRESH, True, rotating("tenant"))),
        extra_yaml=VOLUME_YAML,
    ),
]
