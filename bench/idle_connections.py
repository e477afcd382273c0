"""What an idle connection costs the proxy: resident memory per client connection, both sides connected.

Tansu and the proxy (its own process, default settings) run as in bench/evasion.py. This process opens ``--counts``
plain TCP connections to the proxy and leaves them idle (no request); the proxy opens one to Tansu for each. When
the proxy reports them all active (``active_connections``) and holds a broker socket for each (its open file
descriptors), its resident set size is read; the growth over the same proxy with no client, divided by the number,
is the cost of one idle connection (target: <= 20 KiB). The listener admits connections at its setup pace (a setup
slot is held until the broker first answers, or its time is up: idle connections take the slot's time), so the wait
for them grows with the count; a count not all set up within it is said to be not measured, its figure per
connection set up. Each count runs against a fresh proxy.

Descriptors: the proxy holds two per connection. The soft and hard RLIMIT_NOFILE of this process and of the proxy
and Tansu it starts are raised to ``--nofile`` (default 65536; raising the hard limit needs root, otherwise the
count is capped by what the limit allows, rounded down to 100, and the script says so).

Usage: ``python bench/idle_connections.py [--counts 1000 10000] [--nofile 65536]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.evasion_tenants import proxied  # noqa: E402

TARGET_KIB = 20.0


def raise_nofile(wanted: int) -> int:
    """Raise this process's descriptor limits (inherited by the proxy and Tansu); returns the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), max(hard, wanted)))
    except (ValueError, PermissionError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def settle(pid: int, seconds: float = 2.0) -> int:
    """The resident set once it stopped growing (read every 0.5 s, up to ``seconds`` more), in KiB."""
    last = rss_kib(pid)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = rss_kib(pid)
        if now <= last:
            return now
        last = now
    return last


def measure(count: int) -> dict:
    with proxied([], {}) as p:
        warm = [socket.create_connection(("127.0.0.1", p.port)) for _ in range(10)]  # the first ones' one-off costs
        deadline = time.monotonic() + 30
        while p.metric("kafka_quota_proxy_active_connections") < 10 and time.monotonic() < deadline:
            time.sleep(0.1)
        base_fds = open_fds(p.pid)
        base = settle(p.pid)
        sockets = []
        began = time.monotonic()
        for _ in range(count):
            sockets.append(socket.create_connection(("127.0.0.1", p.port)))
        # the listener sets connections up SETUPS_AT_ONCE at a time, each holding its slot until the broker first
        # answers it or the slot's time is up: idle ones are admitted at about that pace, so the wait grows with count
        deadline = time.monotonic() + 120 + count / 20
        while time.monotonic() < deadline:
            if (
                p.metric("kafka_quota_proxy_active_connections") >= count + 10
                and open_fds(p.pid) >= base_fds + 2 * count
            ):
                break
            time.sleep(0.2)
        opened_s = time.monotonic() - began
        active = p.metric("kafka_quota_proxy_active_connections") - 10
        fds = open_fds(p.pid) - base_fds
        after = settle(p.pid)
        for s in sockets + warm:
            s.close()
        return {
            "count": count,
            "active": active,
            "fds": fds,
            "base_kib": base,
            "after_kib": after,
            "opened_s": opened_s,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--nofile", type=int, default=65536)
    args = parser.parse_args()
    limit = raise_nofile(args.nofile)
    print(f"RLIMIT_NOFILE soft limit of this process, the proxy and Tansu: {limit:,}")
    for count in args.counts:
        if 2 * count + 200 > limit:
            fits = (limit - 200) // 2 // 100 * 100
            print(
                f"{count:,} connections would need {2 * count + 200:,} descriptors in the proxy (the hard limit "
                f"could not be raised): measuring {fits:,} instead"
            )
            count = fits
        r = measure(count)
        active = int(r["active"])
        per = (r["after_kib"] - r["base_kib"]) / max(active, 1)  # what the proxy holds is for those it set up
        verdict = "met" if per <= TARGET_KIB else "MISSED"
        if active < count:
            verdict = f"not measured: {count - active:,} connections were not set up in time"
        print(
            f"{count:,} idle connections ({active:,} active in the proxy, {r['fds']:,} more descriptors, "
            f"opened in {r['opened_s']:.1f} s): proxy RSS {r['base_kib'] / 1024:.1f} -> {r['after_kib'] / 1024:.1f} "
            f"MiB, {per:.1f} KiB per active connection (target <= {TARGET_KIB:.0f} KiB): {verdict}"
        )


if __name__ == "__main__":
    main()
