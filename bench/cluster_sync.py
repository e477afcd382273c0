"""What one sync of ``quota.scope: cluster`` costs at 10 to 10^5 active entities (issue 26: bounded, and measured).

In one process, with the proxy's real managers and its :class:`~proxy.observers.cluster_usage.ClusterUsage`
(without Kafka: the record's bytes are handed from one sidecar to the other): sidecar A's clients use N entities
(each a tenant under a ``<default>`` user quota, with one client id of its own, producing and, unless
``--produce-only``, consuming: 2 N rows; user names ``tenant-000042``, or with ``--names uuid`` random UUIDs, which
do not compress), then A makes its sync's record and sidecar B records it. Printed per N:

* publish: A's gather + round + encode + compress (``fit``, in a thread as the publisher does it), the process's CPU
  time, at the first sync (no guess yet of the bytes
  per entity: encoded until it fits) and the next (the entities used again, and what the first carried); the
  next record's size raw (uncompressed) and compressed, the entities sent and carried to the sync after
  (past ``quota.cluster.record.max.bytes``), and the usage topic's bytes/s per sidecar (one record per
  ``sync.ms``);
* follow: B's decode, and its recording of the delta into its managers the first time (sensors made) and again
  (sensors there), CPU time; the longest the event loop did not run a 1 ms ticker while B took the record as the
  follower does (decode in a thread, recording in steps), and while A made its next record; and, for scale, the
  longest while the loop did nothing else for as long as the follower took (what the machine's other load costs a
  1 ms ticker); and the longest single collection of the garbage collector while B followed and while A published
  (it holds the GIL: a stall whatever the machine's load); and, for sidecar C, which takes A's record the first time
  (its tenants' sensors made), as the follower does, its CPU, the longest stall and the longest collection.

The set-up's objects (10^5 tenants' sensors: about a million) are frozen out of the garbage collector first
(``gc.freeze``): a full collection walks them all (about 0.2 s), whoever's allocation sets it off.

Targets: the publish and the follow each under half the sync interval (1000 ms) on one core; the record at most
``quota.cluster.record.max.bytes`` (768 KiB by default, Kafka's message limit being 1 MiB); the longest loop stall
under 50 ms. Usage: ``python bench/cluster_sync.py [--entities 10,1000,10000,100000] [--produce-only]
[--names tenant|uuid] [--max-bytes 786432]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from config.loader import parse_config  # noqa: E402
from proxy.app import ProxyApp  # noqa: E402
from proxy.observers.cluster_usage import ClusterUsage  # noqa: E402
from quota.sharing.remote_usage import record_remote  # noqa: E402
from quota.sharing.usage_encoding import decode, encode  # noqa: E402

SYNC_MS = 1000
RATE = 10_000_000  # every tenant's producer_byte_rate and consumer_byte_rate


def sidecar(own_id: str, max_bytes: int) -> tuple[ProxyApp, ClusterUsage]:
    app = ProxyApp(
        parse_config(
            {
                "upstream": {"bootstrap_servers": ["127.0.0.1:1"]},
                "listeners": [{"name": "L", "bind": "127.0.0.1:0"}],
                "quotas": [{"entity": {"user": "<default>"}, "producer_byte_rate": RATE, "consumer_byte_rate": RATE}],
                "settings": {
                    "quota.scope": "cluster",
                    "quota.cluster.topic": "__usage",
                    "quota.cluster.id": own_id,
                    "quota.cluster.sync.ms": SYNC_MS,
                    "quota.cluster.record.max.bytes": max_bytes,
                },
            }
        )
    )
    app.cluster_usage = ClusterUsage.for_app(app)  # as app.start() makes it, without its Kafka clients
    return app, app.cluster_usage


def use(app: ProxyApp, n: int, produce_only: bool, names: str, seed: int) -> None:
    rnd, named = random.Random(seed), random.Random(0)  # the same tenants each time, other byte counts
    produce, fetch = app.quotas.produce, app.quotas.fetch
    for i in range(n):
        user = f"tenant-{i:06d}" if names == "tenant" else str(uuid.UUID(int=named.getrandbits(128)))
        client_id = f"{user}-app"
        produce.record_no_throttle(user, client_id, rnd.randrange(1, 2_000_000))
        if not produce_only:
            fetch.record_no_throttle(user, client_id, rnd.randrange(1, 2_000_000))


class LongestCollection:
    """The longest single collection of the cyclic garbage collector (ms) while in use: it holds the GIL
    throughout, so it is a stall of the event loop whatever the machine's other load (which a ticker's gaps also
    count)."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.worst = max(self.worst, (time.perf_counter() - self._started) * 1000)

    def __enter__(self) -> LongestCollection:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc) -> None:
        gc.callbacks.remove(self)


async def longest_stall(work) -> float:
    """The longest gap (ms) between the turns of a 1 ms ticker while ``work`` (a coroutine) runs."""
    done = False
    worst = 0.0

    async def ticker():
        nonlocal worst
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            worst = max(worst, now - last)
            last = now

    tick = asyncio.get_running_loop().create_task(ticker())
    await asyncio.sleep(0.01)
    await work
    done = True
    await tick
    return worst * 1000


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms" if seconds >= 0.01 else f"{seconds * 1000:.2f} ms"


def timed(work):
    """``work()``'s result, and the wall and CPU seconds it took."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    return result, time.perf_counter() - wall, time.process_time() - cpu


async def published(usage: ClusterUsage):
    """One sync as the publisher makes it (in a thread): the record, the process's CPU seconds, the longest stall."""
    out = {}

    async def sync():
        cpu = time.process_time()
        out["fitted"] = await usage._sync()
        out["cpu"] = time.process_time() - cpu

    with LongestCollection() as collection:
        stall = await longest_stall(sync())
    return out["fitted"], out["cpu"], stall, collection.worst


async def one(n: int, args) -> dict:
    a_app, a = sidecar("a", args.max_bytes)
    b_app, b = sidecar("b", args.max_bytes)
    _, c = sidecar("c", args.max_bytes)  # takes A's record the first time, as the follower does
    use(a_app, n, args.produce_only, args.names, n)
    rows = sum(len(v) for v in a.own._values.values())
    gc.collect()
    gc.freeze()  # the set-up's objects: a full collection walking them is the proxy's cost, not the sync's
    first, first_cpu, _, _ = await published(a)  # no guess yet of the bytes per entity
    use(a_app, n, args.produce_only, args.names, n + 1)
    fitted, publish_cpu, publish_stall, publish_gc = await published(
        a
    )  # the next: what the first left over, and as much again
    raw = len(encode(fitted.delta))
    delta, decode_wall, decode_cpu = timed(lambda: decode(fitted.data))
    quotas = b_app.quotas

    def record():
        record_remote(
            delta,
            quotas.clock.now_ms(),
            produce=quotas.produce,
            fetch=quotas.fetch,
            mutations=quotas.mutations,
            producer_ids=quotas.producer_ids,
            connections=b_app.connection_quotas,
        )

    _, first_record_wall, first_record_cpu = timed(record)
    _, again_wall, again_cpu = timed(record)
    gc.freeze()  # and B's new sensors
    started = time.perf_counter()
    with LongestCollection() as collection:
        follow_stall = await longest_stall(b.follower.take_record_stepwise(b"a", fitted.data, b.wall.now_ms()))
    idle_stall = await longest_stall(asyncio.sleep(time.perf_counter() - started))  # the machine's own share
    cpu = time.process_time()
    with LongestCollection() as new_collection:
        new_stall = await longest_stall(c.follower.take_record_stepwise(b"a", fitted.data, c.wall.now_ms()))
    new_cpu = time.process_time() - cpu
    gc.unfreeze()
    return {
        "n": n,
        "rows": rows,
        "first": first_cpu,
        "first_enc": first.encodings,
        "publish": publish_cpu,
        "raw": raw,
        "bytes": len(fitted.data),
        "sent": fitted.sent,
        "carried": fitted.carried,
        "encodings": fitted.encodings,
        "decode": decode_cpu,
        "record_first": first_record_cpu,
        "record_again": again_cpu,
        "follow_stall": follow_stall,
        "publish_stall": publish_stall,
        "idle_stall": idle_stall,
        "follow_gc": collection.worst,
        "publish_gc": publish_gc,
        "new_cpu": new_cpu,
        "new_stall": new_stall,
        "new_gc": new_collection.worst,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entities", default="10,1000,10000,100000")
    parser.add_argument("--produce-only", action="store_true")
    parser.add_argument("--names", choices=("tenant", "uuid"), default="tenant")
    parser.add_argument("--max-bytes", type=int, default=786_432)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(
        f"cluster sync cost: {'produce only' if args.produce_only else 'produce + fetch'} per entity, user names "
        f"{args.names}, record at most {args.max_bytes:,} bytes, sync every {SYNC_MS} ms; load {load:.1f}"
    )
    header = (
        "entities",
        "rows",
        "1st sync (enc)",
        "publish",
        "raw",
        "record",
        "sent",
        "carried",
        "enc",
        "topic B/s",
        "decode",
        "record new",
        "record again",
        "stall follow",
        "stall publish",
        "stall idle",
        "gc follow",
        "gc publish",
        "follow new",
        "stall new",
        "gc new",
    )
    print(" | ".join(header))
    results = []
    for n in (int(x) for x in args.entities.split(",")):
        r = await one(n, args)
        results.append(r)
        print(
            " | ".join(
                (
                    f"{n:,}",
                    f"{r['rows']:,}",
                    f"{ms(r['first'])} ({r['first_enc']})",
                    ms(r["publish"]),
                    f"{r['raw']:,}",
                    f"{r['bytes']:,}",
                    f"{r['sent']:,}",
                    f"{r['carried']:,}",
                    str(r["encodings"]),
                    f"{r['bytes'] * 1000 / SYNC_MS:,.0f}",
                    ms(r["decode"]),
                    ms(r["record_first"]),
                    ms(r["record_again"]),
                    ms(r["follow_stall"] / 1000),
                    ms(r["publish_stall"] / 1000),
                    ms(r["idle_stall"] / 1000),
                    ms(r["follow_gc"] / 1000),
                    ms(r["publish_gc"] / 1000),
                    ms(r["new_cpu"]),
                    ms(r["new_stall"] / 1000),
                    ms(r["new_gc"] / 1000),
                )
            ),
            flush=True,
        )
    print(f"load after: {os.getloadavg()[0]:.1f}")
    big = results[-1]
    checks = [
        (f"publish at {big['n']:,} under half the sync interval (CPU)", big["publish"] * 1000 < SYNC_MS / 2),
        (
            f"follow (decode + record) at {big['n']:,} under half the sync interval (CPU)",
            (big["decode"] + big["record_first"]) * 1000 < SYNC_MS / 2,
        ),
        (
            f"follow (decode + record) at {big['n']:,} under half the sync interval (CPU), the sensors known",
            (big["decode"] + big["record_again"]) * 1000 < SYNC_MS / 2,
        ),
        (f"record at most {args.max_bytes:,} bytes", all(r["bytes"] <= args.max_bytes for r in results)),
        ("longest loop stall under 50 ms", all(max(r["follow_stall"], r["publish_stall"]) < 50 for r in results)),
        (
            "longest garbage collection while following or publishing under 50 ms",
            all(max(r["follow_gc"], r["publish_gc"]) < 50 for r in results),
        ),
    ]
    for what, ok in checks:
        print(f"  {'met' if ok else 'NOT met'}: {what}")


if __name__ == "__main__":
    asyncio.run(main())
