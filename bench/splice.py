"""Past the relay floor (issue 25): direct, the minimal relay, and the proxy with splicing off and on, in one run.

The ``passthrough.py`` measurement (confluent-kafka, 1 KiB messages, produce then consume a fresh topic per round)
on four paths side by side, each with its own Tansu, the paths' order rotating every round: direct; the minimal
uvloop relay of ``relay_floor.py`` (the floor of a user-space relay); the proxy with ``connections.splice: off``
(every byte copied through Python, the path before splicing); the proxy with ``connections.splice: auto``. Prints
each path's median ratio against direct with every round's, the CPU seconds each relay or proxy process used, and
the bytes spliced, against the target (>= 0.95 x direct). Usage:
``python bench/splice.py [--messages N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, free_port, stop_processes, tansu, wait_for_port  # noqa: E402
from bench.passthrough import consume, create_topic, produce  # noqa: E402
from bench.relay_floor import RELAY  # noqa: E402

TARGET = 0.95


def proxy_process(listen: int, broker: int, metrics: int, splice: str) -> tuple[subprocess.Popen, str]:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(
            f"upstream: {{bootstrap_servers: ['127.0.0.1:{broker}']}}\n"
            f"listeners: [{{name: PLAINTEXT, bind: '127.0.0.1:{listen}'}}]\n"
            f"metrics: {{bind: '127.0.0.1:{metrics}'}}\n"
            f"settings: {{connections.splice: {splice}}}\n"
        )
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "run", "--config", f.name, "--log-level", "WARNING"], cwd=ROOT
    )
    return proc, f.name


def cpu_seconds(proc: subprocess.Popen) -> float:
    with open(f"/proc/{proc.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def spliced(metrics_port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    out = {"request": 0.0, "response": 0.0}
    for line in text.splitlines():
        if line.startswith("kafka_quota_proxy_spliced_bytes_total{"):
            direction = line.split('direction="')[1].split('"')[0]
            out[direction] += float(line.rsplit(" ", 1)[1])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    names = ("direct", "relay", "proxy splice off", "proxy splice auto")
    ports = {name: (free_port(), free_port()) for name in names}  # (what clients dial, the broker behind it)
    procs: list[subprocess.Popen] = []
    relays: dict[str, subprocess.Popen] = {}
    files = []
    metrics_ports = {}
    try:
        for name, (listen, broker) in ports.items():
            if name == "direct":
                procs.append(tansu(listen, listen))
                continue
            procs.append(tansu(broker, listen))
            if name == "relay":
                relays[name] = subprocess.Popen([sys.executable, "-c", RELAY, str(listen), str(broker)])
            else:
                metrics_ports[name] = free_port()
                relays[name], path = proxy_process(listen, broker, metrics_ports[name], name.rsplit(" ", 1)[1])
                files.append(path)
            procs.append(relays[name])
        for listen, _ in ports.values():
            wait_for_port(listen)
        results = {name: {"produce": [], "consume": []} for name in names}
        cpu = {name: {"produce": 0.0, "consume": 0.0} for name in relays}
        for r in range(args.rounds):
            order = list(names[r % len(names) :] + names[: r % len(names)])  # each path goes first in turn
            for name in order:
                bootstrap = f"127.0.0.1:{ports[name][0]}"
                topic = f"splice-{r}"
                create_topic(bootstrap, topic)
                for kind, run in (("produce", produce), ("consume", consume)):
                    before = cpu_seconds(relays[name]) if name in relays else 0.0
                    results[name][kind].append(run(bootstrap, topic, args.messages))
                    if name in relays:
                        cpu[name][kind] += cpu_seconds(relays[name]) - before
        moved = {name: spliced(port) for name, port in metrics_ports.items()}
    finally:
        stop_processes(procs)
        for path in files:
            os.unlink(path)
    total_mb = args.messages * args.rounds * 1024 / 1e6
    print(
        f"confluent-kafka, 1 KiB messages, {args.messages} per round, {args.rounds} rounds, paths rotating; "
        f"ratio = median msg/s / direct's median (per round: against that round's direct)"
    )
    for kind in ("produce", "consume"):
        direct = results["direct"][kind]
        d = statistics.median(direct)
        print(f"  {kind}: direct {d:.0f} msg/s")
        for name in names[1:]:
            values = results[name][kind]
            ratio = statistics.median(values) / d
            rounds = " ".join(f"{v / dr:.2f}" for v, dr in zip(values, direct))
            verdict = (
                ""
                if not name.startswith("proxy splice auto")
                else f"  target >= {TARGET}: {'met' if ratio >= TARGET else 'NOT met'}"
            )
            print(
                f"    {name:18} ratio {ratio:.3f}  cpu {cpu[name][kind] / total_mb * 1000:.2f} ms/MB  "
                f"(rounds: {rounds}){verdict}"
            )
    for name, figures in moved.items():
        print(
            f"  {name}: spliced {figures['request'] / 1e6:.0f} MB of requests, {figures['response'] / 1e6:.0f} MB "
            f"of responses (of {total_mb:.0f} MB produced and {total_mb:.0f} MB consumed, plus record overhead)"
        )


if __name__ == "__main__":
    main()
