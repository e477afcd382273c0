"""Request-rate quotas through a sidecar proxy, with real consumer groups, as a hostile tenant would try to escape
them.

On Apache Kafka (the kafka1 session cluster: Tansu's coordinator rebalances a group in seconds, so a group looping
through rebalances on it makes under 2 requests a second, no storm to hold; on Kafka the same loop makes about 12), a
storm group rebalances in a loop: two librdkafka members (confluent-kafka), one aiokafka member and one of Kafka's
own Java consumer (tests/integration/java/RebalancingMember.java, the classic group protocol, run from the Kafka
jars), each changing its subscription whenever it has been assigned, so every member's JoinGroup and SyncGroup go
round again and again.
Beside it a calm group (another group id, other client ids; one member of each client) joins once and stays. Under
``{group: storm}`` the storm's JoinGroup and SyncGroup are held to its quota, every member of it throttled by its
group's count whatever its client id; the calm group is counted under ``{group: "<default>"}`` and never throttled or
muted, and a new group beside the storm joins as fast as one does direct; no member of either group is evicted for
missed heartbeats (each keeps the member id it first got), although the storm's members share their coordinator
connection between heartbeats and throttled joins (what broke librdkafka under Redpanda, redpanda#10141).
"""

from __future__ import annotations

import time

import pytest

from tests.harness import wait_until
from tests.integration.kafka.group_members import AioMember, JavaMember, RdMember, joined_in
from tests.kafka_cluster import unique_topic

pytestmark = [pytest.mark.integration]

STORM_RATE = 2.0  # JoinGroup + SyncGroup per second, the whole storm group's (about 12/s unheld)
WINDOW_NUM = 3  # one-second samples: a fresh group may take (num - 1) s of its quota at once
STORM_SECONDS = 6.0
SETTINGS = {"quota.window.num": WINDOW_NUM, "quota.request.rate.apis": "JoinGroup,SyncGroup"}


def rate_metric(proxy, name: str, user: str = "", client_id: str = "", group: str = "") -> float:
    return proxy.metric(f"kafka_quota_proxy_request_rate_{name}", user=user, client_id=client_id, group=group)


@pytest.mark.long_running(seconds=15)
@pytest.mark.parametrize("upstream", ["kafka1"], indirect=True)
def test_a_rebalancing_group_is_held_to_its_quota_and_a_calm_group_beside_it_is_not(upstream):
    storm, calm = unique_topic("storm"), unique_topic("calm")
    quotas = [
        {"entity": {"group": storm}, "request_rate": STORM_RATE},
        {"entity": {"group": "<default>"}, "request_rate": 1000},
    ]
    with upstream.topics(upstream.direct(""), "rr", count=2, partitions=2) as (one, two):
        direct = joined_in(upstream.direct(""), unique_topic("direct"), one)
        with (
            upstream.sidecar(quotas, **SETTINGS) as proxy,
            JavaMember(upstream.cluster, proxy.bootstrap, storm, "storm-java", [one], flip=[one, two]) as java,
        ):
            # the JVM's start takes seconds: the storm is timed from its first join, all four members in it
            wait_until(lambda: java.member_ids("assigned"), 90, "the Java member's first join")
            joined, before = len(java.member_ids("assigned")), rate_metric(proxy, "requests_total", group=storm)
            rd_storm = [RdMember(proxy.bootstrap, storm, f"storm-rd-{i}", [one]) for i in range(2)]
            aio_storm = AioMember(proxy.bootstrap, storm, "storm-aio", [one], flip=[one, two])
            rd_calm = RdMember(proxy.bootstrap, calm, "calm-rd", [one])
            aio_calm = AioMember(proxy.bootstrap, calm, "calm-aio", [one], flip=None)
            try:
                started, flips = time.monotonic(), 0
                # and until the Java member has been through one of the storm's rebalances
                while time.monotonic() - started < STORM_SECONDS or len(java.member_ids("assigned")) == joined:
                    assert time.monotonic() - started < 60, f"the Java member never rejoined: {java.lines[-20:]}"
                    for member in (*rd_storm, rd_calm):
                        member.poll()
                    for member in rd_storm:  # each storm member rejoins whenever it has been assigned
                        if member.consumer.assignment():
                            flips += 1
                            member.consumer.subscribe([one] if flips % 2 else [one, two])
                elapsed = time.monotonic() - started
                counted = rate_metric(proxy, "requests_total", group=storm) - before
                beside = joined_in(proxy.bootstrap, unique_topic("beside"), one)  # a new group, during the storm
                print(
                    f"storm: {counted:.0f} requests in {elapsed:.1f} s, the Java member assigned "
                    f"{len(java.member_ids('assigned'))} times; a group beside it joined in {beside:.2f} s, "
                    f"{direct:.2f} s direct"
                )
                # held: what the quota lets through over the run (its burst of num - 1 s at the start), and the
                # first join of each member that joined then (three requests: JoinGroup, again with its member id,
                # SyncGroup) past it
                allowed = STORM_RATE * (elapsed + WINDOW_NUM - 1) + 3 * 3
                assert counted <= allowed, (counted, allowed, flips, aio_storm.rejoins)
                assert rate_metric(proxy, "throttled_requests_total", group=storm) > 0
                assert any(m.throttles for m in rd_storm), "the storm's librdkafka members were told to back off"
                # the calm group: counted under <default>, never throttled, its members never told to back off
                assert rate_metric(proxy, "requests_total", group="<default>") > 0
                assert rate_metric(proxy, "throttled_requests_total", group="<default>") == 0
                assert rd_calm.throttles == [] and rd_calm.consumer.assignment() and aio_calm.assigned > 0
                # a group joining beside the storm joins as it does direct: a throttle leaking onto it would add the
                # storm's (up to quota.request.rate.max.throttle.ms, 2 s)
                assert beside < direct + 2.0, (beside, direct)
                # no member of either group evicted for missed heartbeats: each kept its first member id
                for member in (*rd_storm, rd_calm):
                    assert member.first_id and member.member_id() == member.first_id
            finally:
                aio_storm.close()
                aio_calm.close()
                for member in (*rd_storm, rd_calm):
                    member.close()
        for member in (aio_storm, aio_calm):
            assert member.first_id and member.last_id == member.first_id, (member.first_id, member.last_id)
        assert aio_storm.rejoins > 0
        java_ids = java.member_ids("assigned")  # the Java member kept the id of its first join, and never lost it
        assert len(java_ids) > joined and set(java_ids) == {java_ids[0]} and java.member_ids("lost") == [], java.lines
