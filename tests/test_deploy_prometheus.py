"""deploy/prometheus/: the scrape config and alert rules are valid (`promtool check`), every rule has a runbook and
promtool unit tests (`promtool test rules`: series in, alerts out) that show it firing and not firing."""

import os
import subprocess

import yaml

from tests.prometheus_tools import tool

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMETHEUS_DIR = os.path.join(ROOT, "deploy", "prometheus")
RULES = os.path.join(PROMETHEUS_DIR, "alerts.yml")
UNIT_TESTS = os.path.join(PROMETHEUS_DIR, "tests", "alerts_test.yml")


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
    result = subprocess.run([tool("promtool"), "test", "rules", str(tests / "alerts_test.yml")], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode != 0 and "KafkaQuotaProxyEntityThrottled" in result.stdout + result.stderr


def test_every_rule_has_a_runbook_and_unit_tests_firing_and_quiet():
    with open(UNIT_TESTS) as f:
        unit = yaml.safe_load(f)
    assert unit["rule_files"] == ["../alerts.yml"]
    checks = [check for test in unit["tests"] for check in test["alert_rule_test"]]
    for rule in alert_rules():
        name = rule["alert"]
        annotations = rule["annotations"]
        assert {"summary", "description", "runbook"} <= set(annotations), name
        assert len(annotations["runbook"].splitlines()) >= 2, f"{name}: the runbook says what to do"
        assert rule["labels"]["severity"] in ("info", "warning", "critical"), name
        mine = [check for check in checks if check["alertname"] == name]
        assert any(check["exp_alerts"] for check in mine), f"{name}: no unit test shows it firing"
        assert any(not check["exp_alerts"] for check in mine), f"{name}: no unit test shows it quiet"
