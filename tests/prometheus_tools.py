"""promtool and prometheus for the deployment tests: the Debian package `prometheus` provides both. When they are
missing and the tests run as root on a machine with apt-get (CI), they are installed once (tests/apt_tools.py);
otherwise the tests that need them are skipped, saying so.

Also what the tests that run a real Prometheus share: :class:`Prometheus` (a server on a test port, its HTTP API),
the alert rules of deploy/prometheus/alerts.yml, and every query of the Grafana dashboards in deploy/grafana/
dashboards with the dashboard's variables substituted (:func:`dashboard_queries`, :func:`grafana_expr`)."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

from tests import apt_tools

ROOT = Path(__file__).resolve().parent.parent
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
RULES = PROMETHEUS_DIR / "alerts.yml"
DASHBOARDS = ROOT / "deploy" / "grafana" / "dashboards"


def tool(name: str) -> str:
    """The path of ``promtool`` or ``prometheus``, installed with apt-get if possible, or the test is skipped."""
    return apt_tools.tool(name, "prometheus", ("promtool", "prometheus"))


def alert_rules(path: Path = RULES) -> list[dict]:
    """Every rule of an alert rules file (deploy/prometheus/alerts.yml by default), in order."""
    return [rule for group in yaml.safe_load(path.read_text())["groups"] for rule in group["rules"]]


METRIC_NAME = r"\b(?:kafka_quota_proxy|process|python)_[a-z_]+"
"""A metric name the deployment files use: the proxy's own, or the runtime's (proxy.ops.runtime)."""

PARENT_ONLY = r"kafka_quota_proxy_(worker_(restarts|unresponsive|deltas_forwarded|scrape_failures)|cluster_usage_)"
"""Families only a proxy with ``workers`` > 1 (the parent's) or ``quota.cluster.topic`` exports: checked live in
tests/integration/test_cluster_workers.py, which runs both."""


def rules_with_for(path: Path, alert: str, shipped: str, cut: str) -> Path:
    """A copy of alerts.yml at ``path`` whose one change (checked) is ``alert``'s ``for: <shipped>`` cut to ``cut``,
    so a test sees that rule fire within seconds with its expression and every other rule as shipped."""
    head, rule = RULES.read_text().split(f"- alert: {alert}\n", 1)
    rule, n = re.subn(rf"^(\s+for: ){shipped}$", rf"\g<1>{cut}", rule, count=1, flags=re.MULTILINE)
    path.write_text(f"{head}- alert: {alert}\n{rule}")
    before, after = alert_rules(RULES), alert_rules(path)
    assert n == 1 and [{**r, "for": cut} if r["alert"] == alert else r for r in before] == after
    return path


def alert_metric_names(path: Path = RULES) -> set[str]:
    """Every metric name the alert rules' expressions use."""
    return {name for rule in alert_rules(path) for name in re.findall(METRIC_NAME, rule["expr"])}


def _panels(panels: list[dict]):
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))  # a collapsed row holds its panels


def dashboard_queries() -> list[tuple[str, str, str]]:
    """(dashboard file, panel title, expr) of every query of every panel of deploy/grafana/dashboards/*.json."""
    out = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        for panel in _panels(json.loads(path.read_text())["panels"]):
            for target in panel.get("targets", []):
                if target.get("expr"):
                    out.append((path.name, panel["title"], target["expr"]))
    return out


VARIABLES = ("instance", "broker", "tenant")
"""The dashboards' template variables (besides the data source): each has "All" (``.*``, its allValue)."""


def grafana_expr(expr: str, scrape_interval_s: float, **values: str) -> str:
    """A dashboard query as Grafana sends it: each variable (:data:`VARIABLES`) as its "All" value (``.*``) or as
    given (``instance="127.0.0.1:9464"``); ``$__rate_interval`` as Grafana computes it at its smallest, 4 x the
    scrape interval (for a range of a few minutes, where $__interval is below that)."""
    rate_interval = f"{round(4 * scrape_interval_s * 1000)}ms"
    out = expr.replace("$__rate_interval", rate_interval)
    for name in VARIABLES:
        out = out.replace(f"${{{name}}}", values.get(name, ".*")).replace(f"${name}", values.get(name, ".*"))
    assert "$" not in out, f"a dashboard variable not substituted: {out}"
    return out


class Prometheus:
    """A Prometheus server (the Debian package's binary) on a test port, with ``config`` (a prometheus.yml path),
    storing in ``workdir``; its log is ``workdir/prometheus.log``. Ready (``/-/ready``) when constructed."""

    def __init__(self, workdir: Path, config: Path, port: int) -> None:
        from tests.harness import wait_for_port, wait_until

        self.port = port
        self.log_path = Path(workdir) / "prometheus.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [
                tool("prometheus"),
                f"--config.file={config}",
                f"--storage.tsdb.path={Path(workdir) / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for_port(self.port, timeout=30)
            wait_until(self.ready, 30, "Prometheus answers /-/ready")
        except BaseException:
            self.stop()
            raise

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=5) as r:
                return r.status == 200
        except OSError:  # 503 (HTTPError) until its storage is open, or not listening yet
            return False

    def api(self, path: str, **params) -> dict:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]

    def series(self, query: str) -> list[dict]:
        """The instant vector ``query`` evaluates to now (a scalar or string result as one sample)."""
        data = self.api("query", query=query)
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        return data["result"]

    def value(self, query: str) -> float:
        return sum(float(sample["value"][1]) for sample in self.series(query))

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()
