"""The floor per small request: what the smallest Python relay costs per request beside Kroxylicious and the proxy.

Issue 46 asks for the proxy's CPU per small request at or below Kroxylicious's. This measures how much of that any
asyncio relay pays before it does anything with the bytes: a minimal uvloop relay (one ``BufferedProtocol`` per
side, each read written to the other side at once; nothing parsed, nothing rewritten), in
front of one Apache Kafka 4.4.0 broker, beside Kroxylicious 0.12.0 (no filters) and the proxy, each its own process,
the same librdkafka workloads as bench/anchors_kroxylicious.py's ``single`` (one-message Produce requests,
``linger.ms`` 0) and ``group`` (a group of 10 polling 100 partitions, ``fetch.wait.max.ms`` 10). Four relays:

- ``floor``: the minimal relay on the port the broker's CLIENT listener advertises (a sidecar's place), so clients
  reach every broker through it without any address being rewritten;
- ``sidecar``: the proxy in the same place, default settings, no quota configured;
- ``proxy``: the proxy as bench/anchors_kroxylicious.py runs it: cluster mode, issue 46's quotas never binding;
- ``kroxylicious``: as bench/anchors_kroxylicious.py runs it; its JIT compiler threads left out, as there.

A warm-up pass on every relay, then ``--rounds`` rounds, the order rotated each round. Printed: CPU per request
(user + system from /proc/PID/stat over the workloads, the clients' own count of requests) of each relay, and each
against Kroxylicious and against the floor. Usage: ``python bench/relay_floor_requests.py [--rounds 3] [--small
5000] [--group-seconds 8]`` (about 3 minutes).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.anchors_common import ProxyProcess, cpu_seconds, load, stop_process  # noqa: E402
from bench.anchors_kroxylicious import GROUP_PARTITIONS, QUOTAS, compiler_seconds  # noqa: E402
from bench.common import wait_for_port  # noqa: E402
from bench.kroxylicious import KroxyliciousProcess  # noqa: E402
from bench.passthrough import create_topic  # noqa: E402
from bench.rdkafka_workloads import group_polling, produce_single  # noqa: E402
from bench.relay_floor import relay_source  # noqa: E402
from tests.harness import cluster_ports  # noqa: E402
from tests.kafka_cluster import KafkaCluster  # noqa: E402

RELAYS = ("floor", "sidecar", "proxy", "kroxylicious")

# bench/relay_floor.py's relay, but for small frames: one 64 KiB read buffer per side, kept, each read's bytes copied
# out (that relay takes a fresh 1 MiB buffer per read, which costs more than a small request's relaying: 98 us of a
# 100-byte Produce).
FLOOR = relay_source(65536, copy_out=True)
KINDS = ("single", "group")


def run(relay: str, bootstrap: str, direct: str, cpu, args, tag: str) -> dict[str, tuple[float, int]]:
    """Both workloads through one relay: kind -> (CPU seconds, requests)."""
    small = f"single-{relay}-{tag}"
    create_topic(direct, small, 1)
    single = produce_single(bootstrap, small, args.small, cpu)
    group = group_polling(
        bootstrap, f"group-{relay}", f"g-{relay}-{tag}", args.consumers, GROUP_PARTITIONS, args.group_seconds, cpu
    )
    print(f"{tag} {relay}: load {load()}", file=sys.stderr)
    return {"single": (single.cpu, args.small), "group": (group.cpu, group.requests)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small", type=int, default=5_000)
    parser.add_argument("--consumers", type=int, default=10)
    parser.add_argument("--group-seconds", type=float, default=8.0)
    args = parser.parse_args()
    loads = [load()]
    cluster = KafkaCluster(1, "relay-floor-requests").start()
    node = cluster.nodes[0]
    started: list = []
    try:
        krox_port, _ = cluster_ports(4)
        kroxylicious = KroxyliciousProcess(krox_port, node.direct, Path(cluster.directory) / "kroxylicious").start()
        started.append(kroxylicious)
        proxy_port, base = cluster_ports(4)
        proxy = ProxyProcess(proxy_port, node.direct, QUOTAS, broker_port_base=base).start()
        started.append(proxy)
        wait_for_port(base + node.node_id, 60)
        krox_pid = kroxylicious.proc.pid
        sidecar_address = f"127.0.0.1:{node.proxy_port}"
        for relay in RELAYS:
            create_topic(node.direct, f"group-{relay}", GROUP_PARTITIONS)

        # floor and sidecar both sit where CLIENT is advertised: one at a time, each started for its own turn and
        # stopped (its process waited for, so its listening socket closed) before the next
        def start_place(relay: str):
            if relay == "floor":
                proc = subprocess.Popen(
                    [sys.executable, "-c", FLOOR, str(node.proxy_port), str(node.client_port)],
                    stdin=subprocess.DEVNULL,
                )
                wait_for_port(node.proxy_port, 30)
                return proc, lambda: cpu_seconds(proc.pid)
            sidecar = ProxyProcess(node.proxy_port, f"127.0.0.1:{node.client_port}").start()
            return sidecar, sidecar.cpu

        def stop_place(handle) -> None:
            if isinstance(handle, subprocess.Popen):
                stop_process(handle)
            else:
                handle.stop()

        def one(relay: str, tag: str, settings: argparse.Namespace) -> dict[str, tuple[float, int]]:
            if relay == "kroxylicious":
                return run(
                    relay,
                    f"127.0.0.1:{krox_port}",
                    node.direct,
                    lambda: cpu_seconds(krox_pid) - compiler_seconds(krox_pid),
                    settings,
                    tag,
                )
            if relay == "proxy":
                return run(relay, f"127.0.0.1:{proxy_port}", node.direct, proxy.cpu, settings, tag)
            handle, cpu = start_place(relay)
            try:
                return run(relay, sidecar_address, node.direct, cpu, settings, tag)
            finally:
                stop_place(handle)

        warm = argparse.Namespace(**{**vars(args), "group_seconds": 3.0, "small": 2000})
        for relay in RELAYS:
            one(relay, "warm", warm)
        loads.append(load())
        totals = {r: {k: [0.0, 0] for k in KINDS} for r in RELAYS}
        for r in range(args.rounds):
            for relay in RELAYS[r % 4 :] + RELAYS[: r % 4]:
                for kind, (cpu, requests) in one(relay, str(r), args).items():
                    totals[relay][kind][0] += cpu
                    totals[relay][kind][1] += requests
            loads.append(load())
    finally:
        for relay in started:
            relay.stop()
        cluster.stop()
    print(f"Apache Kafka 4.4.0, Kroxylicious 0.12.0; {args.rounds} rounds; load {' '.join(loads)}")
    for kind in KINDS:
        per = {r: totals[r][kind][0] / totals[r][kind][1] * 1e6 for r in RELAYS}
        print(f"  {kind}: CPU per request")
        for relay in RELAYS:
            print(
                f"    {relay:12} {per[relay]:7.1f} us ({totals[relay][kind][1]} requests) = "
                f"{per[relay] / per['kroxylicious']:.2f} x Kroxylicious, {per[relay] / per['floor']:.2f} x the floor"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
