"""Issue 34: a follower that reads the usage topic again changes nothing. Two sidecars, each in front of its own
Tansu broker (as tests/integration/test_cluster_budget.py runs three), share the usage topic on broker 1; one
tenant (``producer_byte_rate`` RATE, ``quota.smoothing`` on as by default with a usage topic) produces flat out
through sidecar 2 for a few seconds, then stops. Sidecar 1 recorded that usage as it came and has paid it back.
Then sidecar 1's follower restarts (stopped and started in place, as it does by itself when it reconnects or finds
the topic changed: a new consumer reading the topic from the beginning, in the same process, with the same quota
state) and reads every record of the last ``quota.cluster.stale.ms`` (30 s here) again. The tenant then produces
through sidecar 1: with each record applied once it gets its quota there at once; when the replay recorded sidecar
2's usage a second time (the code before), the tenant got nothing through sidecar 1 for about as long as it had
produced through sidecar 2. Measured: 0.01 x the quota over the 3 s after the replay before (0.03, 0.00, 0.00 each
second), 1.32 x with each record applied once (1.98, 1.02, 0.96: the full bucket, one second's worth, then the
quota). The bounds are a rate with generous headroom: at least half the quota, at most its burst plus 1.5 x.

Restarting the follower in place is the one step taken inside the proxy: Tansu has no CreatePartitions, which the
Apache Kafka twin (tests/integration/kafka/test_quotas_cluster_replay.py) uses to make every follower read the
topic again from outside.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from config.model import Address
from proxy.cluster.kafka_clients import OwnKafka
from tests.harness import Tansu, free_port, start_proxy, wait_until
from tests.integration.clients import acked_flat_out

pytestmark = [pytest.mark.integration, pytest.mark.measures_rate]

RATE = 1_000_000  # producer_byte_rate, bytes/s
TOPIC = "tenant"
USAGE_TOPIC = "__kafka_quota_proxy_usage"
FIRST_S = 4.0  # the tenant through sidecar 2
MEASURE_S = 3.0  # then through sidecar 1, after the replay
RECORDS = "kafka_quota_proxy_cluster_usage_records_total"


def sidecar_config(port: int, broker_port: int, index: int) -> dict:
    return {
        "upstream": {"bootstrap_servers": [f"127.0.0.1:{broker_port}"]},
        "listeners": [{"name": "PLAINTEXT", "bind": f"127.0.0.1:{port}"}],
        "metrics": {"bind": "127.0.0.1:0"},
        "quotas": [{"entity": {"client-id": "shared"}, "producer_byte_rate": RATE}],
        "admin_principals": ["User:ANONYMOUS"],
        "settings": {
            "quota.scope": "cluster",
            "quota.cluster.topic": USAGE_TOPIC,
            "quota.cluster.id": f"sidecar-{index}",
            "quota.cluster.sync.ms": 250,
            "quota.cluster.stale.ms": 30_000,
            "shutdown.grace.period.ms": 500,
        },
    }


def flat_out(bootstrap: str, seconds: float) -> Counter:
    """The tenant flat out through ``bootstrap`` for ``seconds``: bytes acknowledged per tenth of a second."""
    return acked_flat_out(bootstrap, TOPIC, seconds)


def test_a_follower_reading_the_topic_again_leaves_the_tenant_its_budget():
    from confluent_kafka.admin import AdminClient, NewTopic

    ports = [(free_port(), free_port()) for _ in range(2)]  # (sidecar, broker)
    brokers, proxies = [], []
    usage = OwnKafka((Address("127.0.0.1", ports[0][1]),))
    try:
        for port, broker_port in ports:
            brokers.append(Tansu(broker_port, advertised=f"127.0.0.1:{port}").start())
        for index, (port, broker_port) in enumerate(ports, 1):

            def prepare(app, first=index == 1):
                if not first:
                    app.usage_kafka = usage  # the usage topic is on broker 1

            proxies.append(start_proxy(sidecar_config(port, broker_port, index), loop_kind="asyncio", prepare=prepare))
        for port, _ in ports:
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "client.id": "admin"})
            admin.create_topics([NewTopic(TOPIC, 6, 1)])[TOPIC].result(30)
        one, two = proxies
        first = flat_out(two.bootstrap, FIRST_S)
        assert sum(first.values()) >= RATE * FIRST_S / 2, "the tenant got little through sidecar 2"
        # sidecar 1 has read sidecar 2's last record (sent at the next sync) and paid the usage back
        seen = one.metric(RECORDS, direction="received")
        wait_until(lambda: one.metric(RECORDS, direction="received") >= seen + 4, 30, "sidecar 2's last records")
        time.sleep(2.0)  # a debt of sidecar 2's overshoot, paid back at the quota (about 1 s)
        read = one.metric(RECORDS, direction="received") + one.metric(RECORDS, direction="duplicate")
        own = one.metric(RECORDS, direction="skipped")
        sent = one.metric(RECORDS, direction="sent")
        follower = one.app.cluster_usage  # driven, not read: the follower restarts as after a crash, the sidecar on
        follower.leave_on_stop = False  # no tombstone: the same sidecar goes on
        one.call(follower.stop())
        one.call(follower.start())
        # read from the beginning again: its own records skipped once more, and every peer's record read again
        wait_until(
            lambda: (
                one.metric(RECORDS, direction="skipped") >= own + sent
                and one.metric(RECORDS, direction="received") + one.metric(RECORDS, direction="duplicate") >= 2 * read
            ),
            30,
            "the usage topic read again",
        )
        second = flat_out(one.bootstrap, MEASURE_S)
    finally:
        for proxy in proxies:
            proxy.stop()
        for broker in brokers:
            broker.stop()
    admitted = sum(second.values()) / MEASURE_S / RATE
    seconds = [round(sum(second[t] for t in range(10 * k, 10 * k + 10)) / RATE, 2) for k in range(int(MEASURE_S))]
    print(f"after the replay: {admitted:.2f} x the quota through sidecar 1 ({seconds} each second)")
    assert admitted >= 0.5, (
        f"{admitted:.2f} x producer_byte_rate through sidecar 1 after its follower read the "
        f"topic again ({seconds} each second): sidecar 2's usage recorded twice"
    )
    assert admitted <= (1 + 1.5 * MEASURE_S) / MEASURE_S, f"{admitted:.2f} x: more than its burst and 1.5 x"
