"""Proxy CPU per small Produce request + response (issue 25), one proxy process, old tree against new in one run.

Each round starts a fresh Tansu and one proxy process (``workers: 1``) run from a source tree, drives it with
``--clients`` confluent-kafka producer processes flat out (100-byte messages, one per Produce, acks=1, one
partition: ``bench/workers.py``'s requests/s ceiling) for ``--seconds`` after a warm-up, and reads the proxy
process's CPU time (utime + stime from ``/proc/<pid>/stat``) at the start and the end of the measured interval.
Prints acknowledged requests/s and proxy CPU microseconds per request + response for each tree; the trees
alternate round by round (``--trees old,new`` with ``--tree-old DIR``), so both see the same machine load.

``--quota`` (default ``byte-rate``) gives the producers' client id a ``producer_byte_rate`` far above what they
send, so every Produce is decoded and recorded as with a quota in force; ``none`` runs without quotas.
``--profile DIR`` runs each proxy under cProfile and writes ``DIR/<tree>-<round>.prof`` (slower: compare only
profiles with each other); ``--strace`` counts the proxy's system calls per request (``strace -c``; slows it too).
Usage:
``python bench/small_produce_cost.py [--tree-old /tmp/base] [--rounds 3] [--clients 8] [--seconds 8]``
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, free_port, stop_processes, tansu, wait_for_port, wait_ready  # noqa: E402
from bench.workers import create_topic, run_clients  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICKS, int(fields[12]) / TICKS  # utime, stime (fields 14 and 15 of stat)


RAW_CLIENT = """
import asyncio, struct, sys, time
from kafka.record.default_records import DefaultRecordBatchBuilder
from proxy.codec.header import encode_request_header, frame
from proxy.codec.messages import encode_request, new_request

host, port, connections, window, chunk, start, stop = sys.argv[1:8]
port, connections, window, chunk = int(port), int(connections), int(window), int(chunk)
start, stop = float(start), float(stop)
batch = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
batch.append(0, timestamp=None, key=None, value=b"s" * 100, headers=[])
body = encode_request(0, 9, new_request(0, 9, transactional_id=None, acks=1, timeout_ms=30000, topic_data=[
    {"name": "small", "partition_data": [{"index": 0, "records": bytes(batch.build())}]}]))
chunks = [b"".join(frame(encode_request_header(0, 9, c * chunk + i, "bench") + body) for i in range(chunk))
          for c in range(window // chunk)]
counted = [0]

class Client(asyncio.Protocol):
    def __init__(self, done):
        self.done, self.buf, self.answered, self.next = done, bytearray(), 0, 0

    def connection_made(self, transport):
        self.transport = transport
        for _ in chunks:
            self.send()

    def send(self):
        self.transport.write(chunks[self.next])
        self.next = (self.next + 1) % len(chunks)

    def data_received(self, data):
        buf = self.buf
        buf += data
        pos, n = 0, 0
        while len(buf) - pos >= 4:
            size = struct.unpack_from(">i", buf, pos)[0]
            if len(buf) - pos < size + 4:
                break
            pos += size + 4
            n += 1
        del buf[:pos]
        now = time.time()
        if start <= now < stop:
            counted[0] += n
        self.answered += n
        while self.answered >= chunk:
            self.answered -= chunk
            if now < stop:
                self.send()
        if now >= stop and not self.done.done():
            self.done.set_result(None)

async def main():
    loop = asyncio.get_running_loop()
    done = [loop.create_future() for _ in range(connections)]
    for d in done:
        await loop.create_connection(lambda d=d: Client(d), host, port)
    await asyncio.wait_for(asyncio.gather(*done), stop - time.time() + 30)

asyncio.run(main())
print(counted[0])
"""


def raw_clients(bootstrap: str, args, warm: float) -> float:
    """Acknowledged requests/s of one process holding ``--raw`` connections, each keeping ``--window`` requests
    in flight (sent ``--chunk`` at a time, pre-encoded): the proxy at its own ceiling, clients costing little."""
    host, port = bootstrap.split(":")
    start = time.time() + warm
    stop = start + args.seconds
    answer = subprocess.run(
        [
            sys.executable,
            "-c",
            RAW_CLIENT,
            host,
            port,
            str(args.raw),
            str(args.window),
            str(args.chunk),
            str(start),
            str(stop),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    return int(answer.stdout.split()[-1]) / args.seconds


def one_round(tree: str, args, profile: str | None) -> tuple[float, float, float]:
    """(acknowledged requests/s, proxy CPU us per request, of which system) for the proxy run from ``tree``."""
    broker_port, proxy_port, metrics_port = free_port(), free_port(), free_port()
    quotas = (
        "quotas: [{entity: {client-id: bench}, producer_byte_rate: 1000000000}]\n" if args.quota == "byte-rate" else ""
    )
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(
            f"upstream: {{bootstrap_servers: ['127.0.0.1:{broker_port}']}}\n"
            f"listeners: [{{name: PLAINTEXT, bind: '127.0.0.1:{proxy_port}'}}]\n"
            f"metrics: {{bind: '127.0.0.1:{metrics_port}'}}\n"
            f"settings: {{workers: 1, shutdown.grace.period.ms: 1000}}\n{quotas}"
        )
    procs = [tansu(broker_port, proxy_port)]
    command = (
        [sys.executable]
        + (["-m", "cProfile", "-o", profile] if profile else [])
        + ["-m", "proxy.cli", "run", "--config", f.name, "--log-level", "WARNING"]
    )
    proxy = subprocess.Popen(command, cwd=tree, env={**os.environ, "PYTHONPATH": tree})
    procs.append(proxy)
    try:
        wait_for_port(metrics_port, 30)
        wait_ready(metrics_port)
        bootstrap = f"127.0.0.1:{proxy_port}"
        create_topic(bootstrap, "small", 1)
        import threading

        result = {}
        warm = 4.0
        if args.raw:
            clients = threading.Thread(target=lambda: result.update(rate=raw_clients(bootstrap, args, warm)))
        else:
            clients = threading.Thread(
                target=lambda: result.update(
                    rate=run_clients(bootstrap, "small", "requests", args.clients, warm, args.seconds)[0]
                )
            )
        started = time.time()
        clients.start()
        time.sleep(max(0.0, started + warm - time.time()))
        tracer = None
        if args.strace:  # counts the proxy's system calls (slowing it: CPU figures of such runs mean nothing)
            trace_file = tempfile.NamedTemporaryFile(suffix=".strace", delete=False).name
            tracer = subprocess.Popen(
                ["strace", "-c", "-f", "-o", trace_file, "-p", str(proxy.pid)], stderr=subprocess.DEVNULL
            )
        cpu0 = cpu_seconds(proxy.pid)
        time.sleep(args.seconds)
        cpu1 = cpu_seconds(proxy.pid)
        if tracer is not None:
            tracer.send_signal(signal.SIGINT)
            tracer.wait(30)
        clients.join()
    finally:
        stop_processes([proxy], 20)
        stop_processes(procs[:1])
        os.unlink(f.name)
    rate = result["rate"]
    requests = rate * args.seconds
    if not requests:
        return 0.0, 0.0, 0.0
    if tracer is not None:
        with open(trace_file) as f:
            rows = [line.split() for line in f if line[:1] == " " and line.split()[-1].isidentifier()]
        os.unlink(trace_file)
        calls = {row[-1]: int(row[3]) for row in rows if len(row) >= 5 and row[3].isdigit()}
        top = sorted(calls.items(), key=lambda kv: -kv[1])[:6]
        print(
            f"    system calls per request + response: {sum(calls.values()) / requests:.2f} ("
            + ", ".join(f"{name} {n / requests:.2f}" for name, n in top)
            + ")",
            flush=True,
        )
    return rate, (sum(cpu1) - sum(cpu0)) / requests * 1e6, (cpu1[1] - cpu0[1]) / requests * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree-old", help="source tree of the baseline (e.g. git archive of main to /tmp)")
    parser.add_argument("--tree-new", default=ROOT)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument(
        "--raw",
        type=int,
        default=0,
        metavar="N",
        help="instead of confluent-kafka producers: N connections of one light pipelining client",
    )
    parser.add_argument("--window", type=int, default=200, help="--raw: requests in flight per connection")
    parser.add_argument("--chunk", type=int, default=20, help="--raw: requests sent per write")
    parser.add_argument("--quota", choices=("byte-rate", "none"), default="byte-rate")
    parser.add_argument("--profile", help="directory for cProfile output of every proxy run")
    parser.add_argument("--strace", action="store_true", help="count the proxy's system calls per request (strace -c)")
    args = parser.parse_args()
    trees = [("new", args.tree_new)] + ([("old", args.tree_old)] if args.tree_old else [])
    clients = (
        f"{args.raw} raw connections of {args.window} in flight (sent {args.chunk} at a time)"
        if args.raw
        else f"{args.clients} confluent-kafka producers"
    )
    print(
        f"{clients}, 100 B per Produce, acks=1, quota {args.quota}, {args.seconds:g} s per run, "
        f"{os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in trees}
    for r in range(args.rounds):
        order = trees if r % 2 == 0 else list(reversed(trees))
        for name, tree in order:
            profile = os.path.join(args.profile, f"{name}-{r}.prof") if args.profile else None
            rate, us, system = one_round(tree, args, profile)
            if not rate:
                print(f"  round {r} {name}: no request acknowledged in the interval (not counted)", flush=True)
                continue
            figures[name].append((rate, us))
            print(
                f"  round {r} {name}: {rate:7.0f} requests/s, proxy CPU {us:6.1f} us per request + response "
                f"({system:.1f} of it in the kernel); load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    for name, _ in trees:
        rates, costs = [f[0] for f in figures[name]], [f[1] for f in figures[name]]
        print(
            f"{name}: median {statistics.median(rates):.0f} requests/s, {statistics.median(costs):.1f} us CPU "
            f"per request + response"
        )
    if args.tree_old:
        new, old = (statistics.median(f[1] for f in figures[n]) for n in ("new", "old"))
        print(f"new / old CPU per request: {new / old:.2f} x; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
