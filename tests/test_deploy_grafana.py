"""deploy/grafana/: the dashboard has a row per quota kind, every query is valid PromQL (promtool parses it), and
the provisioning files point Grafana at the dashboard and at Prometheus. That every metric it names is exported
is checked against a live proxy in tests/integration/test_deploy_metrics.py."""

import json
import os
import subprocess

import yaml

from tests.prometheus_tools import tool

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
    for kind in ("producer_byte_rate", "consumer_byte_rate", "controller_mutation_rate", "producer_ids_rate",
                 "connection_creation_rate", "Volume usage", "Config follower", "Pass-through"):
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
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}", "expr": e.replace("$__rate_interval", "5m").replace("$instance", ".*")}
        for i, e in enumerate(exprs)]}]}
    path = tmp_path / "dashboard_queries.yml"
    path.write_text(yaml.safe_dump(rules))
    result = subprocess.run([tool("promtool"), "check", "rules", str(path)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_provisioning_points_at_prometheus_and_the_dashboards():
    with open(os.path.join(GRAFANA, "provisioning", "datasources", "prometheus.yaml")) as f:
        (source,) = yaml.safe_load(f)["datasources"]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    with open(os.path.join(GRAFANA, "provisioning", "dashboards", "kafka-quota-proxy.yaml")) as f:
        (provider,) = yaml.safe_load(f)["providers"]
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"
