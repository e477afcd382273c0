"""The parent of ``workers: N`` adds its workers' usage up into the proxy's one usage-topic record (quota.sharing.usage_sum,
issue 26): what is summed, what is left out, and that a take starts afresh."""

from __future__ import annotations

from quota.sharing.usage_delta import MAX_PRODUCER_IDS_PER_USER, UsageDelta
from quota.sharing.usage_sum import UsageSum


def test_two_workers_deltas_add_up_per_entity_and_a_take_starts_afresh():
    total = UsageSum()
    total.add(
        UsageDelta(
            "0",
            produce=(("alice", "p", 100.0), ("bob", "q", 7.0)),
            fetch=(("alice", "c", 5.0),),
            mutations=(("alice", "a", 2.0),),
            producer_ids=(("alice", 2, (10, 11)),),
        )
    )
    total.add(
        UsageDelta(
            "1",
            produce=(("alice", "p", 50.0),),
            mutations=(("alice", "a", -2.0),),
            producer_ids=(("alice", 1, (12,)), ("bob", 1, (20,))),
        )
    )
    delta = total.take("sidecar-a")
    assert delta.source == "sidecar-a" and delta.scope == ""
    assert sorted(delta.produce) == [("alice", "p", 150.0), ("bob", "q", 7.0)]
    assert delta.fetch == (("alice", "c", 5.0),)
    assert delta.mutations == ()  # taken on one worker, refunded on the other: nothing to tell
    assert sorted(delta.producer_ids) == [("alice", 3, (10, 11, 12)), ("bob", 1, (20,))]
    assert total.take("sidecar-a").empty


def test_connections_other_scopes_and_ids_past_the_bound_stay_out():
    total = UsageSum()
    total.add(
        UsageDelta(
            "0",
            listeners=(("L", 3),),
            ips=(("10.0.0.1", 3),),
            open_connections=(("total", "", 3),),
            produce=(("alice", "p", 1.0),),
        )
    )
    total.add(UsageDelta("0", scope="volume", produce=(("alice", "p", 99.0),)))  # the volume throttle's own rate
    total.add(UsageDelta("1", scope="3", produce=(("alice", "p", 99.0),)))  # a broker's budget (quota.scope broker)
    ids = tuple(range(MAX_PRODUCER_IDS_PER_USER))
    total.add(UsageDelta("0", producer_ids=(("alice", len(ids), ids),)))
    total.add(UsageDelta("1", producer_ids=(("alice", 5, (-1, -2, -3, -4, -5)),)))
    delta = total.take("a")
    assert delta.produce == (("alice", "p", 1.0),)
    assert (delta.listeners, delta.ips, delta.open_connections) == ((), (), ())
    ((user, count, kept),) = delta.producer_ids
    assert (user, count, len(kept)) == ("alice", MAX_PRODUCER_IDS_PER_USER + 5, MAX_PRODUCER_IDS_PER_USER)
