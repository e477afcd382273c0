"""Evasion: what a hostile tenant can and cannot escape, quota by quota (issue 17, "Evasion written down").

Each case starts Tansu and the proxy (in its own process; a PLAINTEXT listener, so every client's principal is
User:ANONYMOUS) with one quota configuration, runs one tenant flat out for ``--seconds`` and prints what the
tenant got after the first ``--warmup`` seconds as a ratio of its quota: about 1 (or below) is held, well above 1
is escaped. The windows are shortened (``quota.window.num`` 2 x 1 s, ``controller.quota.window.num`` 2 x 1 s) so
a run of a few seconds is in steady state; with Kafka's default 11 windows a fresh entity's start-up allowance,
which a tenant rotating names collects again and again, is ten times larger.

The tenants use real clients: Produce v7, Fetch v11 and CreateTopics frames built with the proxy's codec over plain
sockets (so "a new connection per request" costs one TCP connect and nothing else), kafka-python idempotent
producers for the producer-id quota (aiokafka's InitProducerId fails on Tansu), bare ApiVersions connections from
several loopback source addresses for the connection rate. Each line also gives what the tenant cost the proxy:
its resident memory at the end (every client id gets quota sensors, kept for an hour after their last use, as
Kafka keeps them), the most client connections it held open at once (a connection its client abandoned stays open
while it is muted, with its broker connection) and how many it closed because it had no file descriptor left for
their broker connection (``fd_exhausted_total``). The proxy's own log goes to a temporary file. Nothing is
asserted.

Usage: ``python bench/evasion.py [--seconds 8] [--warmup 2] [--cases bytes,fetch,mutations,pids,connections,volume]``
(a case number such as ``2a`` runs that case alone)
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.evasion_cases import CASES  # noqa: E402
from bench.evasion_tenants import (  # noqa: E402
    BYTE_QUOTA,
    CONNECTION_RATE,
    KIB,
    MUTATION_RATE,
    PID_RATE,
    PID_WINDOW_S,
    VALUE_BYTES,
    proxied,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each run")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds left out of the measurement")
    parser.add_argument(
        "--cases",
        default="bytes,fetch,mutations,pids,connections,volume",
        help="groups to run, or case numbers such as 2a,3b",
    )
    args = parser.parse_args()
    wanted = set(args.cases.split(","))
    started = time.monotonic()
    print(
        f"ratio = what the tenant got per second from {args.warmup:g} s to {args.seconds:g} s / its quota; "
        f"byte quotas {BYTE_QUOTA // KIB} KiB/s ({VALUE_BYTES // KIB} KiB records), controller_mutation_rate "
        f"{MUTATION_RATE}/s, producer_ids_rate {PID_RATE} per {PID_WINDOW_S} s, connection_creation_rate "
        f"{CONNECTION_RATE}/s; windows 2 x 1 s"
    )
    for case in CASES:
        if case.group not in wanted and case.what.split(".")[0] not in wanted:
            continue
        with proxied(case.quotas, case.settings or {}, case.extra_yaml) as proxy:
            held, stop = [0.0], threading.Event()

            def sample() -> None:  # the most client connections the proxy held open at once
                while not stop.wait(0.5):
                    held[0] = max(held[0], proxy.metric("kafka_quota_proxy_active_connections"))

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            try:
                tally = case.run(proxy, args.seconds)
            finally:
                stop.set()
                sampler.join(5)
            no_fds = proxy.metric("kafka_quota_proxy_fd_exhausted_total")
            rss = proxy.rss_mib()
        rate = tally.rate(args.warmup, args.seconds)
        print(
            f"  {case.what:88} {rate / case.quota:7.2f} x  ({rate:,.1f} {case.unit}/s; {len(tally.done)} done, "
            f"{tally.throttled} throttled, {tally.failed} failed; proxy RSS {rss:.0f} MiB, held <= {held[0]:.0f} "
            f"connections" + (f", {no_fds:.0f} closed for want of file descriptors" if no_fds else "") + ")",
            flush=True,
        )
    print(f"total {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
