"""The planner's change set, applied as is: does the running proxy then hold each tenant as long as the replay said?

A Tansu broker behind the proxy (its own process, the usage log on, 2 s intervals, the dynamic config topic on),
whose YAML gives every client id ``producer_byte_rate`` ``--default`` (400 kB/s). Tenants, each a librdkafka producer
of its own client id at its default settings, paced at its demand (1000-byte values every 10 ms):

- ``app-1`` ... ``app-5``: 100-300 kB/s, under the default;
- ``bulk``: 550 kB/s, held by the default (a tenant that needs more);
- ``hog``: 3 MB/s, seven times the others' (an offender: the planner names it and does not raise it).

Phase 1 runs them for ``--seconds``; the planner (``python -m analytics.cli analyze --proxy-config`` the proxy's own
file ``--replay``, the demo's JVM settings) reads that part of the log and writes the change set against the table
in force, the replay's held time for each tenant under today's table and under the change, and the commands file.
The commands are run as written (``configs --alter`` through the proxy, its bootstrap put in), then phase 2 runs
the same tenants for as long. Per tenant it prints the held seconds the log recorded in each phase (``held_ms``, the
union of its held spans) beside the replay's prediction for that phase (``today_held_s``, ``candidate_held_s``).

Target: phase 2's held time within 15 % of the prediction for every tenant the change leaves held (predicted over
5 % of the phase), and under 5 % of the phase where the prediction is under it. Phase 1 against ``today_held_s`` is
printed as the replay's own check. Exits 1 on a miss.

Usage: ``python bench/planner_apply.py [--seconds 60] [--default 400000]``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.anchors_byte_rate_clients import Series, threaded  # noqa: E402
from bench.anchors_common import Verdicts, load, stop_process  # noqa: E402
from bench.anchors_topic_rate import paced_produce  # noqa: E402
from bench.common import free_port, wait_for_port, wait_ready  # noqa: E402
from demo.planner import PLANNER_SUBMIT_ARGS  # noqa: E402
from tests.harness import Tansu  # noqa: E402

TENANTS = {
    "app-1": 100_000,
    "app-2": 150_000,
    "app-3": 200_000,
    "app-4": 250_000,
    "app-5": 300_000,
    "bulk": 550_000,
    "hog": 3_000_000,
}
INTERVAL_S = 2
WITHIN = 0.15
HELD_FLOOR = 0.05  # of the phase: a prediction under it is "not held", and so must the log be


def proxy_config(
    path: Path, port: int, broker: int, metrics: int, usage: Path, default: int, interval_s: float = INTERVAL_S
) -> None:
    config = {
        "upstream": {"bootstrap_servers": [f"127.0.0.1:{broker}"]},
        "listeners": [{"name": "PLAINTEXT", "bind": f"127.0.0.1:{port}"}],
        "metrics": {"bind": f"127.0.0.1:{metrics}"},
        "admin_principals": [
            "User:ANONYMOUS"
        ],  # configs --alter through a PLAINTEXT listener (a bench, not production)
        "usage_log": {"dir": str(usage), "interval_seconds": interval_s},
        "quotas": [{"entity": {"client-id": "<default>"}, "producer_byte_rate": default}],
    }
    path.write_text(json.dumps(config, indent=1))  # JSON is YAML


def run_phase(bootstrap: str, seconds: float, queued: dict[str, list]) -> tuple[float, float]:
    """Every tenant at its demand for ``seconds``; returns the phase's (start, end), epoch seconds: its end when the
    tenants were told to stop (what their producers still had queued goes out after it, and is not counted).
    ``queued`` gets each tenant's producer queue, sampled each second (:func:`paced_produce`)."""
    stop = threading.Event()
    start = time.time()
    threads = [
        threaded(
            partial(paced_produce, queued=queued.setdefault(name, [])),
            bootstrap,
            f"topic-{name}",
            name,
            rate,
            stop,
            Series(),
        )
        for name, rate in TENANTS.items()
    ]
    time.sleep(seconds)
    stop.set()
    end = time.time()
    for thread in threads:
        thread.join(30)
    return start, end


def records(usage: Path, start: float, end: float) -> list[dict]:
    """The usage log's records whose interval ended within (start, end]."""
    out = []
    for name in sorted(glob.glob(str(usage / "*.jsonl"))):
        with open(name) as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if start < record.get("time", 0) <= end:
                    out.append(record)
    return out


def held_s(rows: list[dict]) -> dict[str, float]:
    held: dict[str, float] = defaultdict(float)
    for r in rows:
        if r.get("api") == "Produce" and r.get("client_id") in TENANTS:
            held[r["client_id"]] += (r.get("held_ms") or 0) / 1000
    return held


def write_trace(path: Path, phases: list, queued: list[dict[str, list]], rows: list[list[dict]]) -> None:
    """Per phase and tenant: the usage log's Produce figures per interval and the producer's queue per second."""
    trace = []
    for (start, end), queue, phase_rows in zip(phases, queued, rows):
        tenants = {}
        for name in TENANTS:
            mine = [r for r in phase_rows if r.get("api") == "Produce" and r.get("client_id") == name]
            tenants[name] = {
                "usage": [
                    {k: r.get(k) for k in ("time", "request_bytes", "requests", "held_ms", "throttles", "quota_rate")}
                    for r in sorted(mine, key=lambda r: r["time"])
                ],
                "queue": queue.get(name, []),
            }
        trace.append({"start": start, "end": end, "tenants": tenants})
    path.write_text(json.dumps(trace))
    print(f"trace written to {path}")


def replay_rows(out: Path) -> dict[str, tuple[float, float]]:
    """client id -> (today_held_s, candidate_held_s) of its Produce row in the replay's Parquet."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    try:
        rows = spark.read.parquet(str(out / "replay")).where("api = 'Produce'").collect()
    finally:
        spark.stop()
    return {r["client_id"]: (r["today_held_s"], r["candidate_held_s"]) for r in rows if r["client_id"] in TENANTS}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60, help="each phase's length (default 60)")
    parser.add_argument("--default", type=int, default=400_000, help="the <default> client id's producer_byte_rate")
    parser.add_argument("--interval-s", type=float, default=INTERVAL_S, help="the usage log's interval (default 2)")
    parser.add_argument(
        "--trace", type=Path, help="write each held tenant's usage per interval and its producer's queue here (JSON)"
    )
    args = parser.parse_args()
    verdicts = Verdicts()
    work = Path(tempfile.mkdtemp(prefix="planner-apply-"))
    port, broker_port, metrics = free_port(), free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{port}").start()
    config = work / "proxy.yaml"
    proxy_config(config, port, broker_port, metrics, work / "usage", args.default, args.interval_s)
    proxy = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "run", "--config", str(config), "--log-level", "WARNING"], cwd=ROOT
    )
    bootstrap = f"127.0.0.1:{port}"
    try:
        wait_for_port(port, 60)
        wait_ready(metrics)
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})
        for done in admin.create_topics([NewTopic(f"topic-{name}", 3, 1) for name in TENANTS]).values():
            done.result(60)
        print(f"Tansu behind the proxy; <default> producer_byte_rate {args.default} B/s; load {load()}", flush=True)
        queued: list[dict[str, list]] = [{}, {}]
        p1 = run_phase(bootstrap, args.seconds, queued[0])
        time.sleep(args.interval_s * 2)  # the phase's last interval written
        phase1 = work / "phase1"
        phase1.mkdir()
        with open(phase1 / "usage-phase1.jsonl", "w") as f:
            for r in records(work / "usage", *p1):
                f.write(json.dumps(r) + "\n")
        plan = work / "plan"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_SUBMIT_ARGS": PLANNER_SUBMIT_ARGS}
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        analyze = [sys.executable, "-m", "analytics.cli", "analyze", "--input", str(phase1), "--output", str(plan)]
        analyze += ["--proxy-config", str(config), "--replay", "--no-charts", "--quiet"]
        done = subprocess.run(analyze, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            print(done.stdout[-3000:], done.stderr[-3000:])
            verdicts.check("the planner ran", False, f"exit {done.returncode}")
            return verdicts.exit_code()
        commands = (plan / "recommended-commands.txt").read_text()
        print("the change set, as the planner wrote it:")
        for line in commands.splitlines():
            print(f"  {line}")
        for line in commands.splitlines():
            if line.startswith("kafka-quota-proxy configs"):
                argv = shlex.split(line.replace("HOST:PORT", bootstrap))[1:]
                subprocess.run([sys.executable, "-m", "proxy.cli", *argv], cwd=ROOT, check=True, timeout=60)
        time.sleep(2)  # the config topic read back by the proxy
        p2 = run_phase(bootstrap, args.seconds, queued[1])
        time.sleep(args.interval_s * 2)
        logged1 = held_s(records(work / "usage", *p1))
        logged2 = held_s(records(work / "usage", *p2))
        predicted = replay_rows(plan)
        if args.trace:
            write_trace(args.trace, [p1, p2], queued, [records(work / "usage", *p) for p in (p1, p2)])
        length = args.seconds
        print(f"held seconds of {length:.0f} s phases (load {load()}): logged | replay's prediction")
        for name in TENANTS:
            today, after = predicted.get(name, (0.0, 0.0))
            print(
                f"  {name:6} phase 1 {logged1.get(name, 0):5.1f} | today {today:5.1f}    "
                f"phase 2 {logged2.get(name, 0):5.1f} | after the change {after:5.1f}"
            )
            got = logged2.get(name, 0.0)
            if after > HELD_FLOOR * length:
                verdicts.check(
                    f"{name} held as predicted",
                    abs(got - after) <= WITHIN * after,
                    f"{got:.1f} s against {after:.1f} s",
                )
            else:
                verdicts.check(
                    f"{name} not held, as predicted", got <= HELD_FLOOR * length, f"{got:.1f} s against {after:.1f} s"
                )
    finally:
        stop_process(proxy)
        broker.stop()
    return verdicts.exit_code()


if __name__ == "__main__":
    sys.exit(main())
