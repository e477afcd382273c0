"""deploy/prometheus/: the scrape config and alert rules are valid (`promtool check`), every rule has a runbook (a
section of docs/runbooks.md its runbook_url points at) and promtool unit tests (`promtool test rules`: series in,
alerts out) that show it firing and not firing. The same rules ship as a PrometheusRule
(deploy/k8s/monitoring/prometheusrule.yaml): exactly alerts.yml's, valid, and selectable by kube-prometheus-stack
as the ServiceMonitors are."""

import glob
import os
import re
import subprocess

import jsonschema
import pytest
import yaml

from tests.prometheus_tools import tool
from tools import prometheus_rule

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMETHEUS_DIR = os.path.join(ROOT, "deploy", "prometheus")
RULES = os.path.join(PROMETHEUS_DIR, "alerts.yml")
UNIT_TESTS = os.path.join(PROMETHEUS_DIR, "tests", "alerts_test.yml")
RUNBOOKS = os.path.join(ROOT, "docs", "runbooks.md")
PROMETHEUS_RULE = os.path.join(ROOT, "deploy", "k8s", "monitoring", "prometheusrule.yaml")


def alert_rules() -> list[dict]:
    with open(RULES) as f:
        return [rule for group in yaml.safe_load(f)["groups"] for rule in group["rules"]]


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([tool("promtool"), *args], cwd=PROMETHEUS_DIR, capture_output=True, text=True, timeout=120)


def test_rules_and_scrape_config_are_valid():
    rules = promtool("check", "rules", RULES)
    assert rules.returncode == 0, rules.stdout + rules.stderr
    config = promtool("check", "config", os.path.join(PROMETHEUS_DIR, "prometheus.yml"))
    assert config.returncode == 0, config.stdout + config.stderr


def test_promtool_unit_tests_pass():
    result = promtool("test", "rules", UNIT_TESTS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_unit_tests_catch_a_changed_rule(tmp_path):
    """The unit tests can fail: with one rule's threshold changed they do."""
    changed = tmp_path / "alerts.yml"
    with open(RULES) as f:
        text = f.read()
    assert "_seconds_total[5m])) > 0.25" in text
    changed.write_text(text.replace("_seconds_total[5m])) > 0.25", "_seconds_total[5m])) > 0.75"))
    tests = tmp_path / "tests"
    tests.mkdir()
    with open(UNIT_TESTS) as f:
        (tests / "alerts_test.yml").write_text(f.read())
    result = subprocess.run(
        [tool("promtool"), "test", "rules", str(tests / "alerts_test.yml")], capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0 and "KafkaQuotaProxyEntityThrottled" in result.stdout + result.stderr


def test_every_rule_has_a_runbook_and_unit_tests_firing_and_quiet():
    with open(UNIT_TESTS) as f:
        unit = yaml.safe_load(f)
    assert unit["rule_files"] == ["../alerts.yml"]
    checks = [check for test in unit["tests"] for check in test["alert_rule_test"]]
    for rule in alert_rules():
        name = rule["alert"]
        annotations = rule["annotations"]
        assert {"summary", "description", "runbook_url"} <= set(annotations), name
        assert annotations["runbook_url"] == f"docs/runbooks.md#{name.lower()}", name
        assert rule["labels"]["severity"] in ("info", "warning", "critical"), name
        mine = [check for check in checks if check["alertname"] == name]
        assert any(check["exp_alerts"] for check in mine), f"{name}: no unit test shows it firing"
        assert any(not check["exp_alerts"] for check in mine), f"{name}: no unit test shows it quiet"


def runbook_sections() -> dict[str, str]:
    """docs/runbooks.md: GitHub's anchor of each ``## `` heading -> the section's text."""
    with open(RUNBOOKS) as f:
        parts = re.split(r"(?m)^## (.+)$", f.read())
    return {
        re.sub(r"[^a-z0-9 _-]", "", title.strip().lower()).replace(" ", "-"): body
        for title, body in zip(parts[1::2], parts[2::2])
    }


def test_every_runbook_url_points_at_a_runbook_that_says_what_to_check_and_do():
    sections = runbook_sections()
    for rule in alert_rules():
        path, anchor = rule["annotations"]["runbook_url"].split("#")
        assert os.path.join(ROOT, path) == RUNBOOKS and anchor in sections, rule["alert"]
        steps = re.findall(r"(?m)^\d+\. ", sections[anchor])
        assert len(steps) >= 2, f"{rule['alert']}: its runbook lists what to check and do"
    assert set(sections) >= {rule["alert"].lower() for rule in alert_rules()}


# What a PrometheusRule may hold (the Prometheus Operator's CRD, monitoring.coreos.com/v1): unknown fields refused.
_STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
_RULE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["expr"],
    "properties": {
        "alert": {"type": "string"},
        "record": {"type": "string"},
        "expr": {"type": "string"},
        "for": {"type": "string", "pattern": "^(0|([0-9]+(ms|s|m|h|d|w|y))+)$"},
        "keep_firing_for": {"type": "string"},
        "labels": _STRINGS,
        "annotations": _STRINGS,
    },
}
PROMETHEUS_RULE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
                "labels": _STRINGS,
            },
        },
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "groups": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name", "rules"],
                        "properties": {
                            "name": {"type": "string"},
                            "interval": {"type": "string"},
                            "limit": {"type": "integer"},
                            "partial_response_strategy": {"type": "string"},
                            "query_offset": {"type": "string"},
                            "labels": _STRINGS,
                            "rules": {"type": "array", "items": _RULE},
                        },
                    },
                }
            },
        },
    },
}


def prometheus_rule_object() -> dict:
    with open(PROMETHEUS_RULE) as f:
        (doc,) = [d for d in yaml.safe_load_all(f) if d]
    return doc


def test_the_prometheusrule_holds_exactly_the_rules_of_alerts_yml_and_is_valid(tmp_path):
    rule = prometheus_rule_object()
    jsonschema.validate(rule, PROMETHEUS_RULE_SCHEMA)
    with open(RULES) as f:
        assert rule["spec"]["groups"] == yaml.safe_load(f)["groups"]
    assert prometheus_rule.main(["--check"]) == 0, "run tools/prometheus_rule.py"
    spec = tmp_path / "spec.yml"
    spec.write_text(yaml.safe_dump(rule["spec"]))
    checked = promtool("check", "rules", str(spec))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_schema_refuses_a_misspelt_field():
    rule = prometheus_rule_object()
    rule["spec"]["groups"][0]["rules"][0]["anotations"] = rule["spec"]["groups"][0]["rules"][0].pop("annotations")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(rule, PROMETHEUS_RULE_SCHEMA)


def test_kube_prometheus_stack_selects_the_servicemonitors_and_the_rules():
    """Its Prometheus selects ServiceMonitors and PrometheusRules by ``release: <Helm release>``; ours say the
    chart's name, the same on every object."""
    objects = [prometheus_rule_object()]
    for path in glob.glob(os.path.join(ROOT, "deploy", "k8s", "**", "servicemonitor.yaml"), recursive=True):
        with open(path) as f:
            objects += [d for d in yaml.safe_load_all(f) if d]
    assert {o["kind"] for o in objects} == {"PrometheusRule", "ServiceMonitor"} and len(objects) >= 3
    assert {o["metadata"]["labels"].get("release") for o in objects} == {prometheus_rule.RELEASE}
