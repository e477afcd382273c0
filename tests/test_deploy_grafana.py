"""deploy/grafana/: the dashboard has a row per quota kind, every query is valid PromQL (promtool parses it), the
tenant, broker and instance variables filter every query they can, per-entity panels show the top entities only, and
the provisioning files point Grafana at the dashboard and at Prometheus. That every metric it names is exported
is checked against a live proxy in tests/integration/test_deploy_metrics.py."""

import json
import os
import re
import subprocess

import yaml

from tests.prometheus_tools import VARIABLES, dashboard_queries, grafana_expr, tool

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRAFANA = os.path.join(ROOT, "deploy", "grafana")
DASHBOARD = os.path.join(GRAFANA, "dashboards", "kafka-quota-proxy.json")


def dashboard() -> dict:
    with open(DASHBOARD) as f:
        return json.load(f)


def queries() -> list[str]:
    return [target["expr"] for panel in dashboard()["panels"] for target in panel.get("targets", [])]


def test_a_row_per_quota_kind_and_panels_under_rows():
    panels = dashboard()["panels"]
    rows = [p["title"] for p in panels if p["type"] == "row"]
    for kind in (
        "producer_byte_rate",
        "consumer_byte_rate",
        "controller_mutation_rate",
        "producer_ids_rate",
        "connection_creation_rate",
        "Volume usage",
        "Config follower",
        "Pass-through",
    ):
        assert any(kind in title for title in rows), f"no row for {kind}: {rows}"
    assert panels[0]["type"] == "row"
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    for p in panels:
        if p["type"] != "row":
            assert p["datasource"]["uid"] == "${datasource}" and p["targets"], p["title"]


def test_every_query_is_valid_promql(tmp_path):
    exprs = queries()
    assert len(exprs) > 40
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [{"record": f"dashboard:query_{i}", "expr": grafana_expr(e, 75)} for i, e in enumerate(exprs)],
            }
        ]
    }
    path = tmp_path / "dashboard_queries.yml"
    path.write_text(yaml.safe_dump(rules))
    result = subprocess.run(
        [tool("promtool"), "check", "rules", str(path)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_provisioning_points_at_prometheus_and_the_dashboards():
    with open(os.path.join(GRAFANA, "provisioning", "datasources", "prometheus.yaml")) as f:
        (source,) = yaml.safe_load(f)["datasources"]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    with open(os.path.join(GRAFANA, "provisioning", "dashboards", "kafka-quota-proxy.yaml")) as f:
        (provider,) = yaml.safe_load(f)["providers"]
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"


# label sets of the families a query selects on, for the filters: the entity's user (tenant), the broker a volume
# snapshot is about (node_id), the sidecar's broker (the scrape's target label) on everything else
ENTITY = re.compile(
    r"kafka_quota_proxy_(quota_(byte_rate|limit|throttle|throttled|bytes)|controller_mutation_(rate|"
    r"tokens|limit|throttle|throttled)|controller_mutations|producer_ids_(new|tokens|limit|throttle|"
    r"throttled|issued|held_requests|refused|cache))"
)
ABOUT_A_BROKER = re.compile(
    r"kafka_quota_proxy_volume_(used_bytes|free_bytes|snapshot_age_seconds|missing_data|"
    r"limit_breached)"
)


def test_tenant_broker_and_instance_variables_filter_the_queries():
    variables = {v["name"]: v for v in dashboard()["templating"]["list"]}
    assert set(VARIABLES) | {"datasource"} == set(variables)
    for name in VARIABLES:
        assert variables[name]["includeAll"] and variables[name]["allValue"] == ".*", name
    for _, title, expr in dashboard_queries():
        for selector in re.findall(r"(kafka_quota_proxy_\w+|process_\w+)\{([^}]*)\}", expr):
            family, matchers = selector
            assert 'instance=~"$instance"' in matchers, (title, family)
            wanted = 'node_id=~"$broker"' if ABOUT_A_BROKER.match(family) else 'broker=~"$broker"'
            assert wanted in matchers, (title, family)
            if ENTITY.match(family):
                assert 'user=~"$tenant"' in matchers, (title, family)


def test_per_entity_panels_show_the_top_entities_only():
    """A query whose series are one per entity (user, client id, IP) is bounded with topk/bottomk (or aggregated
    away from the entity): a dashboard of 10^5 tenants draws 10 lines, not 10^5."""
    for _, title, expr in dashboard_queries():
        if not re.search(
            r"kafka_quota_proxy_(quota_|controller_mutation|producer_ids_|ip_connection_accept_rate)", expr
        ):
            continue
        by_entity = re.search(r"by \([^)]*\b(user|client_id|ip)\b", expr) or not re.match(r"\s*(sum|max|min)\b", expr)
        if by_entity:
            assert re.match(r"\s*(topk|bottomk)\(10, ", expr) or " and on (" in expr, (title, expr)
