"""What parsing a request header at ``request.header.max.bytes`` costs (issue 21: the control plane never stalls the
data plane).

A proxy (its own process, the CLI, uvloop, the default limit of 65536 bytes) sits in front of a broker. A bystander
client sends ApiVersions through the proxy on one connection every millisecond or so the whole time and records
each round trip. Each case runs ``--repeat`` times, each time on a fresh connection, one at a time:

0. a small header (ApiVersions v3, client id "bench"), the baseline;
1. a header of exactly the limit, 65536 bytes from the api key to the end of its tagged fields (the 4-byte size
   is not part of it), as one 65 KB tagged field and as 32,759 empty tagged fields: ApiVersions v3, answered;
   measured from the request's last byte sent to the answer's last byte read; and 16 of the latter pipelined in one
   1 MiB write on each connection (about one read of the proxy's 1 MiB buffer: parsed in one event-loop turn);
2. one byte over the limit (one tagged field), and 16 MiB headers, all of their bytes sent: one tagged field
   claiming 16 MiB, and a section claiming 8 Mi 2-byte fields: measured from the request's first byte sent to the
   close the client sees.

Part A runs cases 0 and 2 in front of Tansu. Tansu closes the connection on a header whose tagged-field count or
size passes 128 (tests/scripted_broker.py), so it cannot answer case 1: part B runs cases 0 and 1 through a second
proxy in front of a minimal broker this file starts in its own process (``--broker``): it reads whole frames and
answers ApiVersions and Metadata from the fixed part of the header, without parsing the tagged fields.

For each case: the times (median, p99, worst), the proxy's CPU per connection and the bytes it read per connection
(both from /proc, the bystander's own rate, measured alone beforehand, subtracted: the read includes what reached
the proxy from the broker), for refused headers the bytes the client got into its socket before the close (kernel
buffers included, so more than the proxy read), the closes counted in /metrics and the log lines; the bystander's
worst wait and p99 during the case; the proxy's RSS before and after.

Usage: ``python bench/header_limit.py [--repeat 200]``. Run from another checkout to measure that code (the proxy
is started from this file's tree).
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, free_port, stop_processes, tansu, wait_for_port  # noqa: E402
from bench.volume_snapshot import Bystander, cpu_seconds, rss_mib  # noqa: E402
from proxy.codec.apis import API_VERSIONS, METADATA  # noqa: E402
from proxy.codec.primitives import write_uvarint as uvarint  # noqa: E402

LIMIT = 65536  # request.header.max.bytes' default
PIPELINED = 16  # 1c: at-limit requests in one write, 1 MiB
VERSION = 3  # ApiVersions v3: request header v2, client id, then tagged fields
BODY = b"\x06bench\x041.0\x00"  # client_software_name, client_software_version (compact strings), no tagged fields
FIXED = struct.pack(">hhih", API_VERSIONS, VERSION, 1, 5) + b"bench"  # api key .. client id: 15 bytes


def one_field(length: int) -> bytes:
    """A header of exactly ``length`` bytes: the fixed part, then one tagged field (tag 0) padding it out."""
    for data in range(length):
        tagged = uvarint(1) + uvarint(0) + uvarint(data) + b"t" * data
        if len(FIXED) + len(tagged) == length:
            return FIXED + tagged
    raise ValueError(length)


def many_fields(length: int) -> bytes:
    """A header of exactly ``length`` bytes made of empty tagged fields (2 bytes each: a tag under 128, size 0),
    plus one field of 1 or 2 bytes of data when the count leaves an odd byte or two."""
    for count in range((length - len(FIXED)) // 2, 0, -1):
        section = uvarint(count)
        rest = length - len(FIXED) - len(section) - 2 * count
        if rest == 0:
            return FIXED + section + b"\x00\x00" * count
        if rest in (1, 2):  # widen the last field by ``rest`` bytes of data
            return FIXED + section + b"\x00\x00" * (count - 1) + b"\x00" + bytes([rest]) + b"t" * rest
    raise ValueError(length)


def fields(frame: bytes) -> int:
    """The count of tagged fields a frame's header claims."""
    value, shift, pos = 0, 0, 4 + len(FIXED)
    while True:
        value |= (frame[pos] & 0x7F) << shift
        if not frame[pos] & 0x80:
            return value
        pos, shift = pos + 1, shift + 7


def request(header: bytes, claimed: int | None = None) -> bytes:
    """The frame: size, header, body. ``claimed``: the size prefix when the header claims more than is sent."""
    payload = header + BODY
    return struct.pack(">i", len(payload) if claimed is None else claimed) + payload


def huge_one_field() -> bytes:
    """16 MiB header: one tagged field whose size says 16 MiB, all of its bytes sent."""
    data = 16 << 20
    head = FIXED + uvarint(1) + uvarint(0) + uvarint(data)
    return request(head + b"t" * data)


def huge_many_fields() -> bytes:
    """16 MiB header: a section claiming 8 Mi empty fields (2 bytes each), all of them sent."""
    count = 8 << 20
    return request(FIXED + uvarint(count) + bytes([0, 0]) * count)


def read_exact(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return bytes(data)


def answered(port: int, frame: bytes, pipelined: int = 1) -> float:
    """Send ``frame`` on a fresh connection (``pipelined`` copies in one write, correlation ids 1, 2, ...); seconds
    from the last byte sent to the last answer's last byte read."""
    frames = b"".join(frame[:8] + struct.pack(">i", i + 1) + frame[12:] for i in range(pipelined))
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(frames)
        sent = time.perf_counter()
        for i in range(pipelined):
            (size,) = struct.unpack(">i", read_exact(sock, 4))
            body = read_exact(sock, size)
            if body[:6] != struct.pack(">ih", i + 1, 0):  # correlation id, then ApiVersions' error_code
                raise RuntimeError(f"answer {body[:6].hex()} to request {i + 1}")
        return time.perf_counter() - sent


def refused(port: int, frame: bytes) -> tuple[float, int]:
    """Send ``frame`` on a fresh connection until the proxy closes it; (seconds from the first byte sent to the
    close seen, bytes the client got into its socket)."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(30)
        view = memoryview(frame)
        sent = 0
        started = time.perf_counter()
        try:
            while sent < len(frame):
                sent += sock.send(view[sent : sent + (1 << 20)])
            if sock.recv(1):
                raise RuntimeError("the proxy answered a header over the limit")
        except (ConnectionResetError, BrokenPipeError):
            pass  # closed with bytes unread: a reset
        return time.perf_counter() - started, sent


def proc_io(pid: int) -> int:
    """Bytes the process has read through read(2) and the like (sockets included): rchar."""
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    return 0


def metric(url: str, name: str) -> float:
    with urllib.request.urlopen(url, timeout=60) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name) and not line.startswith("#"):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def spread(times: list[float]) -> str:
    times = sorted(times)
    return f"median {ms(times[len(times) // 2])}, p99 {ms(times[int(len(times) * 0.99)])}, worst {ms(times[-1])}"


def bystander_line(bystander: Bystander, start: float, end: float) -> str:
    """The bystander's round trips that overlap [start, end): a wait that began before a case counts in it."""
    waits = sorted(w for t, w in list(bystander.waits) if t < end and t + w > start)
    if not waits:
        return "no requests"
    return (
        f"worst {ms(waits[-1])}, p99 {ms(waits[int(len(waits) * 0.99)])} ({len(waits):,} requests, "
        f"{len(waits) / (end - start):.0f}/s)"
    )


def serve_broker() -> None:
    """The minimal broker of part B, on a port of its own that it prints: one thread per connection, whole frames,
    ApiVersions and Metadata answered from the api key, version and correlation id alone."""
    import threading

    from proxy.codec.header import RequestHeader
    from tests.scripted_broker import api_versions_answer, metadata_answer

    def serve(conn: socket.socket) -> None:
        with conn:
            try:
                while True:
                    (size,) = struct.unpack(">i", read_exact(conn, 4))
                    frame = read_exact(conn, size)
                    api_key, version, correlation = struct.unpack_from(">hhi", frame)
                    header = RequestHeader(size, api_key, version, correlation, None, 0)
                    if api_key == API_VERSIONS:
                        conn.sendall(api_versions_answer(header))
                    elif api_key == METADATA:
                        conn.sendall(metadata_answer(header))
            except (ConnectionError, OSError):
                return

    server = socket.create_server(("127.0.0.1", 0))
    print(server.getsockname()[1], flush=True)
    while True:
        conn, _ = server.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def start_proxy(broker_port: int, extra: str, log) -> tuple[subprocess.Popen, int, str, str]:
    """The proxy in its own process: (process, its port, its /metrics URL, its config file)."""
    proxy_port, metrics_port = free_port(), free_port()
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(
            f"upstream: {{bootstrap_servers: ['127.0.0.1:{broker_port}']}}\n"
            f"listeners: [{{name: PLAINTEXT, bind: '127.0.0.1:{proxy_port}'}}]\n"
            f"metrics: {{bind: '127.0.0.1:{metrics_port}'}}\n"
            "settings: {'socket.request.max.bytes': 33554432}\n" + extra
        )  # 16 MiB headers pass the frame bound
    proxy = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "run", "--config", f.name, "--log-level", "WARNING"], cwd=ROOT, stderr=log
    )
    wait_for_port(proxy_port)
    wait_for_port(metrics_port)
    return proxy, proxy_port, f"http://127.0.0.1:{metrics_port}/metrics", f.name


def log_lines(path: str) -> int:
    with open(path) as f:
        return sum(1 for line in f if "request.header.max.bytes" in line)


def run_part(
    title: str, proxy: subprocess.Popen, port: int, url: str, log_path: str, cases, repeat: int, idle: float
) -> None:
    """Each case is (label, frame, answers): 0 for a header the proxy must refuse, else how many copies of the
    frame go in one write, each answered."""
    print(f"-- {title}", flush=True)
    bystander = Bystander(port)
    bystander.start()
    time.sleep(1)
    rss0 = rss_mib(proxy.pid)
    cpu0, io0, t0 = cpu_seconds(proxy.pid), proc_io(proxy.pid), time.perf_counter()
    time.sleep(idle)
    idle_s = time.perf_counter() - t0
    idle_cpu = (cpu_seconds(proxy.pid) - cpu0) / idle_s
    idle_io = (proc_io(proxy.pid) - io0) / idle_s
    print(
        f"bystander alone for {idle_s:.0f} s: {bystander_line(bystander, t0, t0 + idle_s)}; proxy "
        f"{idle_cpu:.3f} cores, reads {idle_io / 1000:.0f} kB/s, {rss0:.0f} MiB RSS",
        flush=True,
    )
    closed = 'kafka_quota_proxy_connections_closed_total{listener="PLAINTEXT",reason="frame_error"'
    baseline_cpu = None
    for label, frame, answers in cases:
        closes0, lines0 = metric(url, closed), log_lines(log_path)
        cpu0, io0, start = cpu_seconds(proxy.pid), proc_io(proxy.pid), time.perf_counter()
        results = [answered(port, frame, answers) if answers else refused(port, frame) for _ in range(repeat)]
        end = time.perf_counter()
        cpu = (cpu_seconds(proxy.pid) - cpu0 - idle_cpu * (end - start)) / repeat
        read = (proc_io(proxy.pid) - io0 - idle_io * (end - start)) / repeat
        closes, lines = metric(url, closed) - closes0, log_lines(log_path) - lines0
        if baseline_cpu is None:
            baseline_cpu = cpu
        print(f"{label}: frame {len(frame):,} bytes, {repeat} connections in {end - start:.1f} s", flush=True)
        if answers:
            print(f"  answered, last byte sent to {'answer' if answers == 1 else 'last answer'}: {spread(results)}")
        else:
            sent = sorted(s for _, s in results)
            print(
                f"  closed, first byte sent to close: {spread([t for t, _ in results])}\n"
                f"  client got {sent[len(sent) // 2]:,} bytes into its socket before the close (median; "
                f"{sent[0]:,} to {sent[-1]:,})\n"
                f"  closes counted (frame_error): {closes:.0f}; log lines naming the limit: {lines} (one per client "
                f"address per 10 s)"
            )
        if answers > 1:
            print(
                f"  proxy per request: {(cpu - baseline_cpu) / answers * 1000:.2f} ms CPU over the small header's "
                f"connection"
            )
        print(
            f"  proxy per connection: {cpu * 1000:.2f} ms CPU ({cpu / baseline_cpu:.1f}x the small header), "
            f"read {read / 1000:.1f} kB (bystander's rate subtracted)\n"
            f"  bystander meanwhile: {bystander_line(bystander, start, end)}",
            flush=True,
        )
    bystander.stop.set()
    bystander.join(5)
    print(f"proxy RSS: {rss0:.0f} MiB before the cases, {rss_mib(proxy.pid):.0f} MiB after", flush=True)


def stop(procs: list[subprocess.Popen]) -> None:
    stop_processes(list(reversed(procs)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=200, help="connections per case")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds the bystander's own cost is measured alone")
    parser.add_argument("--broker", action="store_true", help="be part B's minimal broker (the bench starts it)")
    args = parser.parse_args()
    if args.broker:
        serve_broker()
        return
    small = (f"0. small header (ApiVersions v3, {len(FIXED) + 1} bytes), baseline", request(FIXED + b"\x00"), 1)
    at_many = request(many_fields(LIMIT))
    print(
        f"proxy from {ROOT}, request.header.max.bytes {LIMIT}, {args.repeat} connections per case, one at a time",
        flush=True,
    )
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
    configs: list[str] = []
    procs: list[subprocess.Popen] = []
    try:
        broker_port = free_port()
        procs.append(tansu(broker_port, broker_port))
        proxy, port, url, config = start_proxy(broker_port, "", log)
        procs.append(proxy)
        configs.append(config)
        run_part(
            "A. in front of Tansu",
            proxy,
            port,
            url,
            log.name,
            [
                small,
                (f"2a. header of {LIMIT + 1} bytes, one over: one tagged field", request(one_field(LIMIT + 1)), 0),
                ("2b. 16 MiB header: one tagged field claiming 16 MiB", huge_one_field(), 0),
                ("2c. 16 MiB header: 8,388,608 tagged fields claimed", huge_many_fields(), 0),
            ],
            args.repeat,
            args.idle,
        )
        stop(procs)
        procs.clear()

        broker = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--broker"], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        procs.append(broker)
        broker_port = int(broker.stdout.readline())
        proxy, port, url, config = start_proxy(broker_port, "dynamic_config: {enabled: false}\n", log)
        procs.append(proxy)
        configs.append(config)
        run_part(
            "B. in front of the minimal broker (--broker)",
            proxy,
            port,
            url,
            log.name,
            [
                small,
                (f"1a. header of exactly {LIMIT} bytes: one tagged field", request(one_field(LIMIT)), 1),
                (f"1b. header of exactly {LIMIT} bytes: {fields(at_many):,} tagged fields", at_many, 1),
                (
                    f"1c. {PIPELINED} headers as in 1b pipelined in one write (one read of the proxy's 1 MiB buffer)",
                    at_many,
                    PIPELINED,
                ),
            ],
            args.repeat,
            args.idle,
        )
    finally:
        stop(procs)
        for name in configs:
            os.unlink(name)
        log.close()
        os.unlink(log.name)


if __name__ == "__main__":
    main()
