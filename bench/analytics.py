"""The quota planner's throughput: usage-log records per second through the Spark job, and how time grows with size.

For each size, a log of about that many records is generated (1,000 well-behaved tenants plus the four misbehaving
ones, 10 s intervals, three rotated ``.jsonl.gz`` files and one plain ``.jsonl``, as the proxy leaves them), then
``analytics.job.run`` reads it and writes every output (Parquet tables, offenders, YAML, commands, report with
charts) on one Spark session (started once, before the first size, and not counted). Generation is timed apart.
With ``--replay`` each size is also run with ``analyze --replay`` (the recommended table), on the same log.
Usage: ``python bench/analytics.py [--sizes 1000000 10000000] [--master local[2]] [--replay]``.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from analytics import job  # noqa: E402
from analytics.generate import Options, generate_records, write_log  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENTITIES = 1000


def options_for(records: int, seed: int = 1) -> Options:
    per_interval = len(next(generate_records(Options(entities=ENTITIES, intervals=1, seed=seed))))
    return Options(entities=ENTITIES, intervals=max(1, math.ceil(records / per_interval)), seed=seed)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    p.add_argument("--master", default="local[2]")
    p.add_argument("--replay", action="store_true", help="also time each size with the replay")
    p.add_argument("--work", default=os.path.join(ROOT, "bench", "out", "analytics"))
    args = p.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = job.spark_session(args.master, "kafka-quota-proxy-bench")
    spark.sparkContext.setLogLevel("ERROR")
    spark.range(1000).count()  # warm the JVM up before timing
    print(f"Spark {spark.version}, master {args.master}, {os.cpu_count()} cores; {ENTITIES} tenants, 10 s intervals")
    results = []
    try:
        for size in args.sizes:
            log, out = os.path.join(args.work, f"log-{size}"), os.path.join(args.work, f"plan-{size}")
            shutil.rmtree(log, ignore_errors=True)
            t0 = time.monotonic()
            n = write_log(log, options_for(size))
            gen_s = time.monotonic() - t0
            mib = sum(os.path.getsize(os.path.join(log, f)) for f in os.listdir(log)) / 2**20
            for replay in [None, "recommended"] if args.replay else [None]:
                load = os.getloadavg()[0]
                t0 = time.monotonic()
                res = job.run(log, out, spark=spark, replay=replay)
                run_s = time.monotonic() - t0
                assert res["records"] == n, (res["records"], n)
                if replay is None:
                    results.append((n, run_s))
                said = "" if replay is None else f", replay of {len(res['replay']['rows'])} tenant APIs shown"
                print(
                    f"{n:>11,} records ({mib:,.0f} MiB on disk, generated in {gen_s:,.0f} s): job "
                    f"{'with' if replay else 'without'} replay {run_s:,.1f} s, {n / run_s:,.0f} records/s, "
                    f"{res['quota items']} quota items{said}; load {load:.1f} before, {os.getloadavg()[0]:.1f} "
                    f"after",
                    flush=True,
                )
            shutil.rmtree(log, ignore_errors=True)
    finally:
        spark.stop()
    for (n0, t0), (n1, t1) in zip(results, results[1:]):
        print(f"{n1 / n0:.1f} x the records: {t1 / t0:.2f} x the time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
