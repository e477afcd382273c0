"""The demo's planner step: ``python -m analytics.cli analyze`` on a demo-sized log, as demo/planner.py runs it, with
its JVM settings (demo.planner.PLANNER_SUBMIT_ARGS) against none, interleaved round by round.

Each run is timed (wall) and its process tree's CPU time is summed (the JVM included: /proc is read every 0.25 s
for every process of the run's session, so up to 0.25 s of each process's last CPU is missed). The outputs
(recommended-quotas.yaml, top_offenders.json, recommended-commands.txt) must be the same byte for byte.
Usage: ``python bench/demo_planner.py [--rounds 3]``; prints each run and the medians, CPU as a ratio to the
baseline's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from analytics import generate  # noqa: E402
from demo.planner import PLANNER_SUBMIT_ARGS  # noqa: E402

OUTPUTS = ("recommended-quotas.yaml", "top_offenders.json", "recommended-commands.txt")
TICK = os.sysconf("SC_CLK_TCK")
VARIANTS = {"baseline (no settings)": None, "demo settings": PLANNER_SUBMIT_ARGS}


def session_cpu(sid: int, seen: dict[int, float]) -> None:
    """Record the CPU seconds so far of every process in session ``sid``."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[3]) == sid:
            seen[int(name)] = (int(fields[11]) + int(fields[12])) / TICK


def run(usage: str, out: str, submit_args: str | None) -> tuple[float, float, tuple[str, ...]]:
    env = {"SPARK_LOCAL_IP": "127.0.0.1", **os.environ, "PYTHONPATH": ROOT}
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    if submit_args:
        env["PYSPARK_SUBMIT_ARGS"] = submit_args
    started = time.monotonic()
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "analytics.cli", "analyze", "--input", usage, "--output", out),
            *("--master", "local[2]", "--no-fleet-default"),  # as demo/planner.py runs it
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    seen: dict[int, float] = {}
    while proc.poll() is None:
        session_cpu(proc.pid, seen)
        time.sleep(0.25)
    wall = time.monotonic() - started
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"analyze exited with {proc.returncode}: {err[-1000:]}")
    outputs = []
    for name in OUTPUTS:
        with open(os.path.join(out, name), encoding="utf-8") as f:
            outputs.append(f.read())
    return wall, sum(seen.values()), tuple(outputs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    scratch = tempfile.mkdtemp(prefix="demo-planner-")
    try:
        usage = os.path.join(scratch, "usage")
        # the demo's log: about 460 records of its own run beside the synthetic tenants it adds (entities=10)
        records = generate.write_log(usage, generate.Options(entities=14, intervals=60, start_time=time.time() - 600))
        print(f"log: {records} records; load before {os.getloadavg()[0]:.1f}", flush=True)
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in VARIANTS}
        first = None
        for r in range(args.rounds):
            for name, submit_args in VARIANTS.items():
                wall, cpu, outputs = run(
                    usage, os.path.join(scratch, f"out-{r}-{len(results[name])}-{name[:4]}"), submit_args
                )
                first = first or outputs
                assert outputs == first, f"{name}: outputs differ"
                results[name].append((wall, cpu))
                print(
                    f"round {r} {name:24s} wall {wall:6.1f} s  CPU {cpu:6.1f} s  load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
        base_cpu = statistics.median(c for _, c in results["baseline (no settings)"])
        for name, runs in results.items():
            cpu = statistics.median(c for _, c in runs)
            print(
                f"{name:24s} median wall {statistics.median(w for w, _ in runs):6.1f} s  CPU {cpu:6.1f} s "
                f"({cpu / base_cpu:.2f} x baseline)"
            )
        print(f"outputs identical in all {args.rounds * len(VARIANTS)} runs; load after {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
