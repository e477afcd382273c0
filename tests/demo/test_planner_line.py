"""The demo's planner line on the planner's own output: what demo-limited's recommendation rests on, and the verdict
that a recommendation for the throttled producer must say it is constrained by its quota (issue 37: a stop-and-go
client's burst was recommended as its need, 9,000,000 B/s for a client held at 1 MiB/s)."""

from analytics.recommend import Rules, bases, build_quotas, to_yaml
from demo.planner import PlanResult, basis_of


def plan_for(produce_row):
    rows = [produce_row, {**produce_row, "client_id": "demo-unlimited", "held_intervals": 0, "quota_rate": None}]
    items = build_quotas(rows, [], [])
    text = to_yaml(items, Rules(), basis=bases(rows))
    recommended = {it["entity"]["client-id"]: {k: v for k, v in it.items() if k != "entity"} for it in items}
    return PlanResult(
        600, recommended, {}, "report.html", None, 500, basis_of(text, ("demo-limited", "demo-unlimited"))
    )


def row(**values):
    return {
        "user": "ANONYMOUS",
        "client_id": "demo-limited",
        "api": "Produce",
        "intervals": 60,
        "request_rate_p99": 1_100_000.0,
        "held_intervals": 55,
        "quota_rate": 1_048_576.0,
        "held_share": 0.9,
        "request_demand": 2_500_000.0,
        **values,
    }


def test_the_limited_producers_recommendation_says_it_rests_on_its_estimated_demand():
    plan = plan_for(row())
    assert plan.ok
    assert plan.recommended["demo-limited"] == {"producer_byte_rate": 3_800_000}
    line = plan.text()
    assert (
        "producer_byte_rate 3800000: constrained by the current quota 1,048,576 B/s (held 90% of the time, in 55 "
        "of 60 intervals); estimated demand 2,500,000 B/s"
    ) in line and line.endswith("OK")


def test_a_limited_producer_not_seen_held_fails_the_line():
    """Unpaced and under a 1 MiB/s quota it is held all run: a plan that does not say so read the log wrong."""
    plan = plan_for(row(held_intervals=0, quota_rate=None))
    assert not plan.ok and plan.text().endswith("FAIL")
