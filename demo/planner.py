"""The demo's last step: the quota planner (PySpark) on the usage log its proxy wrote, with synthetic misbehaving
tenants beside it, run as an operator runs it (``python -m analytics.cli analyze``), in a child process: Spark and
its JVM never load into the demo, and stopping the demo stops them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import yaml

from demo.processes import Children, DemoError

PLANNER_TIMEOUT_S = 300  # about 30 s on a 2-core laptop

# The planner's JVM for a job of a few thousand records: no web UI, and the client compiler alone with the serial
# collector (the optimising compiler's and the parallel collector's threads cost more CPU than such a short job saves).
# The same recommendations and report; about half the CPU time (bench/RESULTS.md, "The demo's planner step"). An
# operator's own PYSPARK_SUBMIT_ARGS wins.
SMALL_JOB_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"  # also the test suite's Spark JVMs
PLANNER_SUBMIT_ARGS = f"--conf spark.ui.enabled=false --driver-java-options '{SMALL_JOB_JVM}' pyspark-shell"


@dataclass(frozen=True)
class PlanResult:
    records: int
    recommended: dict  # client id -> its recommended quota keys
    top: dict  # dimension -> the top entity's name
    report: str
    error: str | None = None

    synthetic: int = 0  # records of the synthetic tenants among them
    basis: dict = field(default_factory=dict)  # client id -> {key: what its recommendation rests on}

    @property
    def ok(self) -> bool:
        """Both clients recommended for; the limited producer (unpaced, held by its quota all run) marked
        constrained by the current quota, never its catch-up burst taken for its need."""
        return (
            self.error is None
            and "demo-limited" in self.recommended
            and "demo-unlimited" in self.recommended
            and self.records > self.synthetic > 0
            and self.basis.get("demo-limited", {}).get("producer_byte_rate", "").startswith("constrained")
        )

    def text(self) -> str:
        if self.error is not None:
            return f"quota planner: failed: {self.error}  FAIL"
        limited, unlimited = self.recommended.get("demo-limited", {}), self.recommended.get("demo-unlimited", {})
        said = self.basis.get("demo-limited", {})
        why = "; ".join(
            f"{k} {limited.get(k)}: {said[k]}" for k in ("producer_byte_rate", "consumer_byte_rate") if k in said
        )
        return (
            f"quota planner (PySpark): {self.records - self.synthetic} records of this run's usage log and "
            f"{self.synthetic} of synthetic tenants; "
            f"recommends demo-limited {limited} ({why}), demo-unlimited {unlimited}; top new producer ids "
            f"{self.top.get('new_producer_ids')}, top connection rate {self.top.get('connection_rate')}; "
            f"report {self.report}  {'OK' if self.ok else 'FAIL'}"
        )


def quota_planner(usage_dir: str, out_dir: str, children: Children, report: Callable[[str], None]) -> PlanResult:
    try:
        from analytics import generate  # the synthetic log's generator: plain Python, no Spark
    except ImportError as exc:
        return _failed(f"{exc} (install kafka-quota-proxy[analytics])", report)
    with tempfile.TemporaryDirectory() as scratch:  # the generator's files, beside the proxy's, under other names
        synthetic = generate.write_log(
            scratch, generate.Options(entities=10, intervals=60, start_time=time.time() - 600)
        )
        for name in os.listdir(scratch):
            shutil.move(os.path.join(scratch, name), os.path.join(usage_dir, f"synthetic-{name}"))
    proc = children.start(
        "the quota planner",
        [
            sys.executable,
            "-m",
            "analytics.cli",
            "analyze",
            "--input",
            usage_dir,
            "--output",
            out_dir,
            "--master",
            "local[2]",
            "--no-fleet-default",  # each tenant's own recommendation: the demo's two clients', and what each rests on
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_SUBMIT_ARGS": PLANNER_SUBMIT_ARGS, **os.environ},
    )
    try:
        out, err = proc.communicate(timeout=PLANNER_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise DemoError(f"the quota planner did not finish within {PLANNER_TIMEOUT_S} s") from exc
    read = re.search(r"read ([\d,]+) records", out)
    if proc.returncode != 0 or read is None:
        tail = " | ".join((err or out).strip().splitlines()[-3:])
        return _failed(f"python -m analytics.cli analyze exited with code {proc.returncode}: {tail[-300:]}", report)
    with open(os.path.join(out_dir, "recommended-quotas.yaml"), encoding="utf-8") as f:
        text = f.read()
    items = yaml.safe_load(text)["quotas"]
    with open(os.path.join(out_dir, "top_offenders.json"), encoding="utf-8") as f:
        offenders = json.load(f)
    recommended = {
        item["entity"]["client-id"]: {k: v for k, v in item.items() if k != "entity"}
        for item in items
        if item["entity"].get("client-id") in ("demo-limited", "demo-unlimited") and "user" in item["entity"]
    }
    top = {}
    for name, dim in offenders.items():
        if dim["top"]:
            first = dim["top"][0]
            top[name] = first.get("user") or first.get("ip") or first.get("client_id")
    result = PlanResult(
        int(read.group(1).replace(",", "")),
        recommended,
        top,
        os.path.join(out_dir, "report.html"),
        None,
        synthetic,
        basis_of(text, ("demo-limited", "demo-unlimited")),
    )
    report(result.text())
    return result


def basis_of(text: str, client_ids) -> dict:
    """What each recommendation of ``client_ids`` rests on, from recommended-quotas.yaml: the comment just above
    each key of its item (``# constrained by ...``, wrapped over several lines)."""
    out: dict = {}
    entity: dict | None = None
    comment: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("- entity:"):
            entity, comment = yaml.safe_load(stripped[2:])["entity"], []
        elif stripped.startswith("#"):
            comment.append(stripped[1:].strip())
        elif entity is not None and comment:
            if entity.get("client-id") in client_ids and "user" in entity:
                out.setdefault(entity["client-id"], {})[stripped.split(":", 1)[0]] = " ".join(comment)
            comment = []
    return out


def _failed(error: str, report: Callable[[str], None]) -> PlanResult:
    result = PlanResult(0, {}, {}, "", error=error)
    report(result.text())
    return result
