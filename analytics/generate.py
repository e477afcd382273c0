"""A synthetic usage log, in the format the proxy writes, for tests, benchmarks and demos. Pure Python, no Spark.

The log is a directory of JSON-lines files, one record per entity per interval (never per request)::

    {"time": 1700000010.0, "interval_s": 10.0, "listener": "PLAINTEXT", "ip": "192.0.2.7", "user": "user-7",
     "client_id": "app-7", "api": "Produce", "requests": 42, "request_bytes": 1234567, "response_bytes": 2100,
     "throttle_ms": 0, "shadow_throttle_ms": 0, "partition_mutations": 0, "new_producer_ids": 0,
     "connections_opened": 0, "proxy": "proxy-1", "broker": null, "scope": "broker"}

Connection records have ``api``, ``user`` and ``client_id`` null, ``ip`` set and ``connections_opened > 0``.
Older files are rotated and gzipped (``usage-00000.jsonl.gz``), the newest is plain (``usage.jsonl``), as a
rotating proxy log leaves them.

Besides ``entities`` well-behaved tenants (each produces and fetches at its own lognormal rate, from its own IP)
the log holds four misbehaving ones, named so tests can find them (:data:`HOG`, :data:`PID_CHURNER`,
:data:`STORM_IP`, :data:`TOPIC_STORM`): a byte-rate hog, a producer-id churner, a connection-storm IP and a
topic-creation storm; two a quota holds (:data:`THROTTLED`), and one whose heavy use is legitimate
(:data:`LEGITIMATE`, a backup connector fetching 40 MB/s). Same seed, same log.

    python -m analytics.generate --out /tmp/usage --entities 50 --intervals 360 --seed 1
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from analytics.usage_record import FIELDS as FIELDS  # the log's keys, in order
from analytics.usage_record import connection_record, record

START_TIME = 1_767_225_600.0  # 2026-01-01T00:00:00Z: a fixed epoch, so a seed gives the same log byte for byte

# The misbehaving tenants: (user, client_id) or IP. Addresses are from the documentation ranges (RFC 5737).
HOG = ("hog", "bulk-loader")
PID_CHURNER = ("churner", "restart-loop")
TOPIC_STORM = ("ops", "topic-creator")
STORM_IP = "203.0.113.66"
# A tenant whose heavy use is legitimate: a backup connector reading every topic at 40 MB/s, steadily. Far above the
# fleet like the hog, so the planner names it an offender unless the operator says it is legitimate (--legitimate).
LEGITIMATE = ("backup", "s3-sink")
LEGITIMATE_FETCH_RATE = 40_000_000  # bytes/s
# Tenants whose demand exceeds their producer_byte_rate, throttled by the proxy's own quota (analytics.demand.replay):
# (user, client_id) -> (quota, demand when quiet, demand at its peak, peak intervals, every so many intervals). The
# true demand (what a recommendation should cover) is the peak: a steady tenant 3x over its quota all the time, and a
# batch window 2x over it for one minute in five.
THROTTLED = {
    ("steady", "over-quota"): (1_000_000, 3_000_000, 3_000_000, 1, 1),
    ("batch", "nightly-window"): (2_000_000, 500_000, 4_000_000, 6, 30),
}
THROTTLED_STEP_S = 0.1  # how often a throttled tenant sends (each request is demand x this)
# Their client queues nothing: what it is handed while held is lost (analytics.demand.Client, buffer_bytes=0), the
# client the demand estimate reads exactly. A producer that queues (librdkafka, the Java client) sends what a hold
# kept back as fast as it can after it, which the usage log cannot tell from its own pace (analytics/README.md).


@dataclass(frozen=True)
class Options:
    entities: int = 20
    intervals: int = 360
    seed: int = 1
    interval_s: float = 10.0
    start_time: float = START_TIME
    listener: str = "PLAINTEXT"
    proxy: str | None = "proxy-1"  # the proxy id written on every record (one sidecar)
    scope: str | None = "broker"  # the quota.scope written on every record
    misbehaving: bool = True
    throttled: bool = True  # the tenants of THROTTLED
    legitimate: bool = True  # the heavy, legitimate tenant LEGITIMATE
    intervals_per_file: int = 0  # rotate after this many intervals (0: about four files in all)


class _Tenant:
    """A well-behaved tenant: one user and client id, one IP, a produce and a fetch rate of its own."""

    def __init__(self, i: int, rng: random.Random) -> None:
        self.user = "ANONYMOUS" if i % 7 == 6 else f"user-{i % 13}"
        self.client_id = f"app-{i}"
        self.ip = f"192.0.2.{i % 250 + 1}" if i < 250 else f"198.51.100.{i % 250 + 1}"
        self.produce_rate = rng.lognormvariate(math.log(200_000), 1.0)  # bytes/s
        self.fetch_rate = rng.lognormvariate(math.log(400_000), 1.0)
        self.producer = rng.random() < 0.7
        self.consumer = rng.random() < 0.8 or not self.producer


def _tenant_records(t: _Tenant, now: float, o: Options, rng: random.Random) -> Iterator[dict]:
    dt = o.interval_s
    if t.producer:
        nbytes = int(t.produce_rate * dt * rng.lognormvariate(0, 0.3))
        yield record(
            now,
            dt,
            o.listener,
            t.ip,
            t.user,
            t.client_id,
            "Produce",
            requests=max(1, nbytes // 16384),
            request_bytes=nbytes,
            response_bytes=60 * max(1, nbytes // 16384),
        )
    if t.consumer:
        nbytes = int(t.fetch_rate * dt * rng.lognormvariate(0, 0.3))
        reqs = int(dt * 2)
        yield record(
            now,
            dt,
            o.listener,
            t.ip,
            t.user,
            t.client_id,
            "Fetch",
            requests=reqs,
            request_bytes=reqs * 120,
            response_bytes=nbytes,
        )
    if rng.random() < 0.05:
        yield record(
            now, dt, o.listener, t.ip, t.user, t.client_id, "Metadata", requests=1, request_bytes=40, response_bytes=900
        )
    if t.producer and rng.random() < 0.002:  # a producer restart now and then
        yield record(
            now,
            dt,
            o.listener,
            t.ip,
            t.user,
            t.client_id,
            "InitProducerId",
            requests=1,
            request_bytes=50,
            response_bytes=30,
            new_producer_ids=1,
        )


def _misbehaving_records(now: float, k: int, o: Options, rng: random.Random) -> Iterator[dict]:
    dt = o.interval_s
    # The hog: 50 MB/s of produce, throttled for most of each interval.
    nbytes = int(50_000_000 * dt * rng.uniform(0.9, 1.1))
    yield record(
        now,
        dt,
        o.listener,
        "192.0.2.200",
        *HOG,
        "Produce",
        requests=nbytes // 1_000_000,
        request_bytes=nbytes,
        response_bytes=2000,
        throttle_ms=int(dt * 1000 * 0.8),
        shadow_throttle_ms=int(dt * 1000 * 0.8),
    )
    # The churner: a new idempotent producer every second or so, each one's InitProducerId a new PID.
    pids = rng.randint(int(dt * 0.8), int(dt * 1.5))
    yield record(
        now,
        dt,
        o.listener,
        "192.0.2.201",
        *PID_CHURNER,
        "InitProducerId",
        requests=pids,
        request_bytes=pids * 50,
        response_bytes=pids * 30,
        new_producer_ids=pids,
    )
    yield record(
        now,
        dt,
        o.listener,
        "192.0.2.201",
        *PID_CHURNER,
        "Produce",
        requests=pids,
        request_bytes=pids * 300,
        response_bytes=pids * 60,
    )
    # The connection storm: 50 to 100 connections a second from one address.
    yield connection_record(now, dt, o.listener, STORM_IP, int(dt * rng.uniform(50, 100)))
    # The topic-creation storm: bursts of 20 topics x 10 partitions in one interval of every 6.
    if k % 6 == 0:
        yield record(
            now,
            dt,
            o.listener,
            "192.0.2.202",
            *TOPIC_STORM,
            "CreateTopics",
            requests=20,
            request_bytes=20 * 120,
            response_bytes=20 * 40,
            partition_mutations=200,
        )
    elif k % 6 == 3:
        yield record(
            now,
            dt,
            o.listener,
            "192.0.2.202",
            *TOPIC_STORM,
            "DeleteTopics",
            requests=20,
            request_bytes=20 * 60,
            response_bytes=20 * 30,
            partition_mutations=200,
        )


def _legitimate_records(now: float, o: Options, rng: random.Random) -> Iterator[dict]:
    """:data:`LEGITIMATE`: 40 MB/s of fetch (within 5 %), two fetches a second, never held."""
    nbytes = int(LEGITIMATE_FETCH_RATE * o.interval_s * rng.uniform(0.95, 1.05))
    reqs = int(o.interval_s * 2)
    yield record(
        now,
        o.interval_s,
        o.listener,
        "192.0.2.220",
        *LEGITIMATE,
        "Fetch",
        requests=reqs,
        request_bytes=reqs * 120,
        response_bytes=nbytes,
    )


def throttled_demand(o: Options, peak_rate: float, quiet_rate: float, peak: int, every: int) -> list[tuple]:
    """A :data:`THROTTLED` tenant's demand: ``(end_s, interval_s, rate)`` per interval of the log."""
    return [
        (o.start_time + (k + 1) * o.interval_s, o.interval_s, peak_rate if k % every < peak else quiet_rate)
        for k in range(o.intervals)
    ]


def _throttled_runs(o: Options) -> dict:
    """Each :data:`THROTTLED` tenant through the proxy's quota: its outcome per interval."""
    from analytics import demand  # the quota/ core: only when the log has these tenants

    rng = random.Random(o.seed)  # request sizes vary, as a real client's batches do
    return {
        name: (
            quota,
            demand.replay(
                throttled_demand(o, peak_rate, quiet, peak, every),
                quota,
                rng=rng,
                client=demand.Client(step_s=THROTTLED_STEP_S, buffer_bytes=0, request_bytes=math.inf, gap_ms=0),
            ),
        )
        for name, (quota, quiet, peak_rate, peak, every) in THROTTLED.items()
    }


def _throttled_records(runs: dict, now: float, k: int, o: Options) -> Iterator[dict]:
    for i, ((user, client_id), (quota, outcomes)) in enumerate(runs.items()):
        out = outcomes[k]
        if out.requests or out.held_ms:
            yield record(
                now,
                o.interval_s,
                o.listener,
                f"192.0.2.{210 + i}",
                user,
                client_id,
                "Produce",
                requests=out.requests,
                request_bytes=int(out.sent),
                response_bytes=60 * out.requests,
                throttle_ms=int(out.held_ms),
                held_ms=round(out.held_ms),
                throttles=out.throttles,
                quota_rate=float(quota) if out.throttles else None,
                observed_rate_sum=round(out.observed_rate_sum, 1),
            )


def generate_records(o: Options) -> Iterator[list[dict]]:
    """The log, one list of records per interval, in time order."""
    rng = random.Random(o.seed)
    runs = _throttled_runs(o) if o.throttled else {}
    tenants = [_Tenant(i, rng) for i in range(o.entities)]
    ips = sorted({t.ip for t in tenants})
    heavy = random.Random(o.seed + 1_000_003)  # its own stream: the other tenants' figures stay as they were
    for k in range(o.intervals):
        now = o.start_time + (k + 1) * o.interval_s
        batch: list[dict] = []
        for t in tenants:
            batch.extend(_tenant_records(t, now, o, rng))
        for ip in ips:  # ordinary clients reconnect now and then
            if rng.random() < 0.1:
                batch.append(connection_record(now, o.interval_s, o.listener, ip, rng.randint(1, 3)))
        if o.misbehaving:
            batch.extend(_misbehaving_records(now, k, o, rng))
        batch.extend(_throttled_records(runs, now, k, o))
        if o.legitimate:
            batch.extend(_legitimate_records(now, o, heavy))
        for rec in batch:
            rec["proxy"], rec["scope"] = o.proxy, o.scope
        yield batch


def write_jsonl(path: str, records: Iterable[dict]) -> int:
    """Write records to one file (gzipped when the name ends in .gz); returns how many."""
    n = 0
    gz = path.endswith(".gz")
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=6) if gz else open(path, "w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec, separators=(",", ":")))
            f.write("\n")
            n += 1
    return n


def write_log(out_dir: str, o: Options) -> int:
    """Write the generated log to ``out_dir`` (created if missing); returns the number of records."""
    os.makedirs(out_dir, exist_ok=True)
    per_file = o.intervals_per_file or max(1, math.ceil(o.intervals / 4))
    batches = generate_records(o)
    total = 0
    files = math.ceil(o.intervals / per_file)
    for i in range(files):
        name = "usage.jsonl" if i == files - 1 else f"usage-{i:05d}.jsonl.gz"
        chunk = (rec for _, batch in zip(range(per_file), batches) for rec in batch)
        total += write_jsonl(os.path.join(out_dir, name), chunk)
    return total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m analytics.generate", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, metavar="DIR", help="directory to write (created if missing)")
    p.add_argument("--entities", type=int, default=Options.entities, help="well-behaved tenants")
    p.add_argument("--intervals", type=int, default=Options.intervals)
    p.add_argument("--seed", type=int, default=Options.seed)
    p.add_argument("--interval-s", type=float, default=Options.interval_s, help="length of one interval, seconds")
    p.add_argument("--no-misbehaving", action="store_true", help="leave out the four misbehaving tenants")
    args = p.parse_args(argv)
    n = write_log(
        args.out,
        Options(
            entities=args.entities,
            intervals=args.intervals,
            seed=args.seed,
            interval_s=args.interval_s,
            misbehaving=not args.no_misbehaving,
        ),
    )
    print(f"wrote {n} records to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
