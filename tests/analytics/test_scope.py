"""Which quota.scope the planner's figures are for (analytics.scope, pure Python): the one the log records, broker
for logs that record none, --scope when given; a log recording both is refused with the proxies named."""

import pytest

from analytics.scope import ScopeError, choose


def src(scope, proxy, broker=None, records=10):
    return {"scope": scope, "proxy": proxy, "broker": broker, "records": records}


def test_the_scope_the_log_records():
    chosen = choose([src("cluster", "a:9092"), src("cluster", "b:9092")])
    assert (chosen.scope, chosen.proxies, chosen.budgets, chosen.notes()) == ("cluster", 2, 2, [])
    assert chosen.figures().startswith("quota.scope cluster: each rate is the tenant's total over the whole cluster")


def test_an_old_log_is_read_as_broker_and_says_so():
    chosen = choose([src(None, None, records=1234)])
    assert (chosen.scope, chosen.proxies, chosen.budgets) == ("broker", 1, 1)
    assert chosen.notes() == [
        "1,234 records do not say their scope (written before the proxy recorded it): read as "
        "broker, one proxy, no broker id"
    ]
    assert "per broker, the busiest broker's in each interval (1 broker budget in this log)" in chosen.figures()
    assert choose([]).scope == "broker"  # an empty log


def test_broker_budgets_are_proxy_and_broker_pairs():
    """A cluster-mode proxy's broker ports (and its bootstrap port, broker null) are budgets of their own."""
    chosen = choose(
        [
            src("broker", "cm:9092", 1),
            src("broker", "cm:9092", 2),
            src("broker", "cm:9092", None),
            src("broker", "sidecar:9092"),
        ]
    )
    assert (chosen.scope, chosen.proxies, chosen.budgets) == ("broker", 2, 4)
    assert (
        "Kafka applies producer_byte_rate, consumer_byte_rate and producer_ids_rate on each broker" in chosen.figures()
    )


def test_mixed_scopes_are_refused_unless_one_is_asked_for():
    sources = [src("broker", "a:9092", records=5), src(None, None, records=2), src("cluster", "c:9092", records=7)]
    with pytest.raises(ScopeError) as err:
        choose(sources)
    assert str(err.value) == (
        "the log mixes quota.scope broker (7 records from (no id), a:9092, 2 of them without a scope) and cluster "
        "(7 records from c:9092): a figure cannot be per broker and per cluster at once; analyse each scope's logs "
        "separately (--input per directory), or pass --scope broker|cluster to read them all as one"
    )
    chosen = choose(sources, "cluster")
    assert chosen.scope == "cluster" and chosen.asked
    assert (
        "the log was written under quota.scope broker and cluster: these figures are for running under "
        "cluster, as --scope asked"
    ) in chosen.notes()


def test_asking_for_the_scope_the_log_records_adds_no_note_and_unknown_scopes_are_named():
    assert choose([src("broker", "a")], "broker").notes() == []
    assert "one proxy's log" in choose([src("broker", "a")], "cluster").notes()[-1]
    with pytest.raises(ScopeError, match="unknown quota.scope 'global'"):
        choose([src("global", "a")])
    with pytest.raises(ScopeError, match="--scope must be broker or cluster, got 'both'"):
        choose([], "both")
