"""A proxy's resident memory under a hostile tenant's floods (issue 35), one proxy process per run, one source tree
against another.

Each run starts a fresh Tansu and one proxy (``workers: 1``) from ``--tree``, reads its VmRSS when ready, floods it,
and reads VmRSS again once the flood is done (the highest of a few reads over two seconds):

- ``client-ids``: ``--ids`` Produce requests (acks=0, one 100-byte record each) on 4 pipelined connections, each
  with a client id never seen before, under ``/clients/<default>`` producer_byte_rate and controller_mutation_rate
  quotas far above the traffic: every id is a new quota entity (the issue's flood: 830 B per id, 39 to 1,181 MiB);
- ``holds``: ``--holds`` connections each send one Produce of ``--hold-mb`` MB (acks=1) bringing a new producer id
  once the ``producer_ids_rate`` burst is spent, so each would be held (the issue's 40 holds of 8 MB: 40 to 355
  MiB); the memory is read while they would still be held.

Usage: ``python bench/flood_memory.py --case client-ids --tree DIR [--ids 300000]``,
``python bench/flood_memory.py --case holds --tree DIR [--holds 40 --hold-mb 8]``. An older tree is a plain export:
``git archive <commit> | tar -x -C DIR``.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import free_port, stop_processes, tansu, wait_for_port, wait_ready  # noqa: E402
from bench.workers import create_topic  # noqa: E402


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def produce_frame(topic: str, client_id: str, pid: int, value: bytes, acks: int, corr: int) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    from proxy.codec.apis import PRODUCE
    from proxy.codec.header import encode_request_header, frame
    from proxy.codec.messages import encode_request, new_request

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 else -1,
        batch_size=len(value) + 1024,
    )
    builder.append(0, timestamp=0, key=None, value=value, headers=[])
    msg = new_request(
        PRODUCE,
        9,
        acks=acks,
        timeout_ms=30000,
        topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": bytes(builder.build())}]}],
    )
    return frame(encode_request_header(PRODUCE, 9, corr, client_id) + encode_request(PRODUCE, 9, msg))


def flood_client_ids(port: int, topic: str, ids: int, connections: int = 4) -> None:
    """``ids`` Produce requests, acks=0, each from a new client id; the client id is the header's last field but
    one, so each frame is the template with its id's digits replaced (same length)."""
    template = produce_frame(topic, "flood-" + "0" * 9, -1, b"x" * 100, 0, 1)
    marker = b"flood-" + b"0" * 9
    at = template.index(marker)

    def send(first: int, count: int) -> None:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            chunk = []
            for i in range(first, first + count):
                chunk.append(template[:at] + b"flood-%09d" % i + template[at + len(marker) :])
                if len(chunk) == 500:
                    sock.sendall(b"".join(chunk))
                    chunk = []
            sock.sendall(b"".join(chunk))
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass

    per = ids // connections
    threads = [threading.Thread(target=send, args=(n * per, per)) for n in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def flood_holds(port: int, topic: str, holds: int, hold_mb: int) -> list[socket.socket]:
    """The burst's two ids, then ``holds`` connections each sending one ``hold_mb`` MB Produce with a new id (not
    waiting for any answer): the sockets, left open."""
    for pid in (1, 2):
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(produce_frame(topic, "burst", pid, b"b", 1, 1))
            sock.settimeout(30)
            sock.recv(4)
    value = os.urandom(hold_mb * 1_000_000)
    socks = []
    for n in range(holds):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(produce_frame(topic, f"holder-{n}", 100 + n, value, 1, 1))
        socks.append(sock)
    return socks


def run(args) -> tuple[float, float]:
    broker_port, proxy_port, metrics_port = free_port(), free_port(), free_port()
    if args.case == "client-ids":
        quotas = (
            "quotas: [{entity: {client-id: '<default>'}, producer_byte_rate: 1000000000, "
            "controller_mutation_rate: 1000}]\n"
        )
        settings = "workers: 1"
    else:
        quotas = "quotas: [{entity: {user: '<default>'}, producer_ids_rate: 2}]\n"
        # a burst of 2, then a token every 5 s: the 40th hold ends 200 s on, within the 300 s bound
        settings = (
            "workers: 1, producer.id.quota.window.num: 1, producer.id.quota.window.size.seconds: 10, "
            "producer.id.quota.max.hold.ms: 300000, quota.mute.max.ms: 600000, "
            "upstream.response.timeout.ms: 600000"
        )
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(
            f"upstream: {{bootstrap_servers: ['127.0.0.1:{broker_port}']}}\n"
            f"listeners: [{{name: PLAINTEXT, bind: '127.0.0.1:{proxy_port}'}}]\n"
            f"metrics: {{bind: '127.0.0.1:{metrics_port}'}}\n"
            f"settings: {{{settings}, shutdown.grace.period.ms: 1000}}\n{quotas}"
        )
    procs = [tansu(broker_port, proxy_port)]
    proxy = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "run", "--config", f.name, "--log-level", "ERROR"],
        cwd=args.tree,
        env={**os.environ, "PYTHONPATH": args.tree},
    )
    procs.append(proxy)
    try:
        wait_for_port(metrics_port, 30)
        wait_ready(metrics_port)
        create_topic(f"127.0.0.1:{proxy_port}", "flood", 1)
        time.sleep(1.0)
        before = rss_mib(proxy.pid)
        began = time.monotonic()
        kept = []
        if args.case == "client-ids":
            flood_client_ids(proxy_port, "flood", args.ids)
        else:
            kept = flood_holds(proxy_port, "flood", args.holds, args.hold_mb)
        after = before
        for _ in range(8):
            time.sleep(0.25)
            after = max(after, rss_mib(proxy.pid))
        print(f"{args.case}: {before:.0f} -> {after:.0f} MiB RSS ({time.monotonic() - began:.1f} s)", flush=True)
        for sock in kept:
            sock.close()
        return before, after
    finally:
        stop_processes(procs[::-1])
        os.unlink(f.name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=("client-ids", "holds"), required=True)
    parser.add_argument("--tree", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--ids", type=int, default=300_000)
    parser.add_argument("--holds", type=int, default=40)
    parser.add_argument("--hold-mb", type=int, default=8)
    run(parser.parse_args())


if __name__ == "__main__":
    main()
