"""Connection churn (issue 44, T2): gone clients must cost little, and a newcomer from elsewhere is served within 2 s.

Tansu, a frame-counting relay in front of it (its own process: how many Produce frames reach the broker) and the
proxy (its own process, default settings, its open-files limit lowered to ``--nofile`` so that descriptor exhaustion
comes within seconds; ``--nofile 0``: as inherited). ``--attackers`` processes, flat out for ``--seconds``: connect
(from 127.0.0.1, or with ``--sources N`` from N loopback addresses 127.1.x.y), send ``--frames`` (1,000) pipelined
30-byte Produce v3 ``acks=0`` frames (0: none, an open/close loop), close (FIN; ``--rst``: reset). Meanwhile and for
``--after`` seconds after, a newcomer from 127.0.0.250 connects every 0.5 s and sends ApiVersions: the time to its
answer is measured (a failed connect or no answer within 10 s counts as 10 s).

Prints the newcomer's worst wait during and after the flood, the connections the attackers made, the Produce frames
that reached the broker (and per connection), the proxy's largest descriptor count, and its log's counts of
"Too many open files". Exits 1 when a newcomer waited over 2 s (``--max-wait``), or more than
``connections.max.inflight.requests`` (5) frames per gone connection reached the broker.

``--request api_versions`` or ``metadata``: each connection sends ``--frames`` of those instead (answered, to a client
that has gone); ``--frames 1``: one request before each close.

``--ip-rate R``: the proxy has ``{ip: <default>} connection_creation_rate`` R, so that the attackers' connections are
held and refused by the per-IP rate (KIP-612): its CPU per connection is then that refusal path's.

``--starve N``: the proxy gets little CPU: once it serves, its threads are pinned to one core (``sched_setaffinity``, as
``taskset -a`` does) with N busy loops pinned beside it, and ``--nice K`` lowers its priority further; the attackers
and the newcomer are not pinned.

Usage: ``python bench/churn.py [--seconds 10] [--after 5] [--attackers 2] [--sources 1] [--nofile 1024] [--frames 1000]
[--request produce] [--rst] [--starve 2] [--nice 10] [--ip-rate 20]``
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import (  # noqa: E402
    ROOT,
    STARVED_CPU,
    accept_queue,
    cpu_seconds,
    fds,
    free_port,
    starved,
    tansu,
    wait_for_port,
)
from proxy.codec.apis import API_VERSIONS, METADATA, PRODUCE  # noqa: E402
from proxy.codec.header import encode_request_header, frame  # noqa: E402
from proxy.codec.messages import encode_request, new_request  # noqa: E402
from tests.integration.raw import recv_exactly  # noqa: E402

FRAMES = 1000
RELAY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "counting_relay.py")  # counts what reaches the broker
NEWCOMER = "127.0.0.250"
GIVE_UP_S = 10.0
CONNECTED: list[float] = []  # seconds each newcomer took to connect
MAX_PER_GONE = 5  # connections.max.inflight.requests' default


REQUESTS = ("produce", "api_versions", "metadata")  # what each attacking connection sends before it closes


def attack_frames(frames: int = FRAMES, request: str = "produce") -> bytes:
    """``frames`` pipelined requests: 30-byte Produce v3 ``acks=0`` (no answer), ApiVersions v3 or Metadata v12 for
    every topic (each answered, to a client that has gone)."""
    if request == "api_versions":
        body = encode_request(
            API_VERSIONS, 3, new_request(API_VERSIONS, 3, client_software_name="evil", client_software_version="1")
        )
        return frame(encode_request_header(API_VERSIONS, 3, 1, "evil") + body) * frames
    if request == "metadata":
        body = encode_request(METADATA, 12, new_request(METADATA, 12, topics=None))
        return frame(encode_request_header(METADATA, 12, 1, "evil") + body) * frames
    body = encode_request(PRODUCE, 3, new_request(PRODUCE, 3, acks=0, timeout_ms=1000, topic_data=[]))
    one = frame(encode_request_header(PRODUCE, 3, 1, "evil") + body)
    assert len(one) == 30, len(one)
    return one * frames


def loopback_sources(n: int) -> list[str]:
    """``n`` loopback addresses for the attackers (127.0.0.1 alone for 1; else 127.1.x.y, up to 65,535 of them)."""
    if n <= 1:
        return ["127.0.0.1"]
    return [f"127.1.{i // 256}.{i % 256}" for i in range(1, n + 1)]


def attacker(
    port: int, sources: list[str], until: float, rst: bool, made, frames: int = FRAMES, request: str = "produce"
) -> None:
    """Flat out until ``until``: connect from the next of ``sources``, send ``frames`` pipelined ``request`` frames
    (0: nothing, an open/close loop), close (or reset)."""
    payload = attack_frames(frames, request)
    n = 0
    while time.time() < until:
        source = sources[n % len(sources)]
        n += 1
        s = socket.socket()
        try:
            s.bind((source, 0))
            s.settimeout(2)
            s.connect(("127.0.0.1", port))
            if payload:
                s.sendall(payload)
            if rst:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        finally:
            s.close()
            with made.get_lock():
                made.value += 1


def newcomer(port: int) -> float:
    """Seconds from connect to the ApiVersions answer (GIVE_UP_S when none)."""
    start = time.monotonic()
    try:
        with socket.socket() as s:
            s.bind((NEWCOMER, 0))
            s.settimeout(GIVE_UP_S)
            s.connect(("127.0.0.1", port))
            CONNECTED.append(time.monotonic() - start)
            s.sendall(frame(encode_request_header(API_VERSIONS, 0, 7, "newcomer")))
            size = struct.unpack(">i", recv_exactly(s, 4))[0]
            recv_exactly(s, size)
        return time.monotonic() - start
    except OSError:
        return GIVE_UP_S


def proxy_time(pid: int) -> tuple[float, float]:
    """``pid``'s CPU seconds so far, and its main thread's seconds runnable but waiting for a core (0 where
    ``/proc/<pid>/schedstat`` cannot be read): how much of a wait the machine's other work took from the proxy."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            delay = int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        delay = 0.0
    return cpu_seconds(pid), delay


def closed_by_reason(metrics_port: int) -> dict[str, float]:
    """The proxy's connections accepted and closed (by reason) so far, from its metrics."""
    counts: dict[str, float] = {}
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    except OSError:
        return counts
    for line in text.splitlines():
        if line.startswith("kafka_quota_proxy_connections_accepted_total"):
            counts["accepted"] = counts.get("accepted", 0) + float(line.rsplit(" ", 1)[1])
        elif line.startswith("kafka_quota_proxy_connections_closed_total"):
            reason = line.split('reason="', 1)[1].split('"', 1)[0]
            counts[reason] = counts.get(reason, 0) + float(line.rsplit(" ", 1)[1])
    return counts


@dataclass
class Churned:
    seconds: float
    made: int  # connections the attackers made
    reached: int  # Produce frames that reached the broker
    waits: list[tuple[float, float]]  # (seconds into the flood, the newcomer's wait)
    proxy_in_waits: list[tuple[float, float]]  # for each wait: the proxy's CPU seconds in it, and its event loop's
    # seconds runnable but waiting for a core (Linux schedstat, added when it next runs: a wait under way at the
    # newcomer's start is counted whole)
    most_fds: int
    most_queued: int  # the most connections seen waiting in the kernel's accept queue
    fd_errors: int  # "Too many open files" and "out of file descriptors" lines in the proxy's log
    cpu_s: float  # the proxy's CPU time (user + system) from the flood's start to the end
    log_lines: list[str]
    closed: dict[str, float]  # the proxy's connections_closed_total by reason, and "accepted"

    @property
    def per_connection(self) -> float:
        return self.reached / max(self.made, 1)

    def worst(self, during: bool) -> float:
        return max((w for at, w in self.waits if (at < self.seconds) == during), default=0.0)

    def percentile(self, during: bool, q: float) -> float:
        """The newcomer's wait at quantile ``q`` (nearest rank) during the flood or after it."""
        waits = sorted(w for at, w in self.waits if (at < self.seconds) == during)
        return waits[min(len(waits) - 1, int(q * len(waits)))] if waits else 0.0


def churn(
    seconds: float,
    after: float,
    attackers: int,
    sources: int,
    nofile: int | None,
    rst: bool,
    frames: int = FRAMES,
    relay: bool = True,
    request: str = "produce",
    starve: int = 0,
    nice: int = 0,
    ip_rate: float = 0.0,
) -> Churned:
    """Start Tansu, the counting relay (``relay``; else the proxy is in front of Tansu itself and nothing is counted)
    and the proxy (RLIMIT_NOFILE ``nofile``, None: as inherited), run the flood and the newcomer."""
    broker_port, relay_port, proxy_port, metrics_port = free_port(), free_port(), free_port(), free_port()
    broker = tansu(broker_port, proxy_port)
    count_file = tempfile.NamedTemporaryFile("w", suffix=".count", delete=False).name
    counter = None
    if relay:
        counter = subprocess.Popen([sys.executable, RELAY, str(relay_port), str(broker_port), count_file])
    upstream_port = relay_port if relay else broker_port
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(
            f"upstream: {{bootstrap_servers: ['127.0.0.1:{upstream_port}']}}\n"
            f"listeners: [{{name: PLAINTEXT, bind: '127.0.0.1:{proxy_port}'}}]\n"
            f"metrics: {{bind: '127.0.0.1:{metrics_port}'}}\ndynamic_config: {{enabled: false}}\n"
        )
        if ip_rate:
            f.write(f"quotas: [{{entity: {{ip: <default>}}, connection_creation_rate: {ip_rate}}}]\n")
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)

    def lowered() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    loops: list[subprocess.Popen] = []
    proxy = None
    try:
        wait_for_port(upstream_port)
        proxy = subprocess.Popen(
            [sys.executable, "-m", "proxy.cli", "run", "--config", f.name, "--log-level", "WARNING"],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=lowered,
        )
        wait_for_port(proxy_port)
        assert newcomer(proxy_port) < GIVE_UP_S, "the proxy does not answer"
        if starve or nice:
            starved(proxy.pid, nice)
            pinned = lambda: os.sched_setaffinity(0, {STARVED_CPU})  # noqa: E731
            loops.extend(
                subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=pinned) for _ in range(starve)
            )
        base, cpu_before = int(open(count_file).read() or 0), cpu_seconds(proxy.pid)
        addresses = loopback_sources(sources)
        made = multiprocessing.Value("l", 0)
        start = time.time()
        until = start + seconds
        procs = [
            multiprocessing.Process(
                target=attacker,
                args=(proxy_port, addresses[i::attackers] or addresses, until, rst, made, frames, request),
            )
            for i in range(attackers)
        ]
        for p in procs:
            p.start()
        waits: list[tuple[float, float]] = []
        most_fds, most_queued = [0], [0]
        stop = threading.Event()

        def watch_fds() -> None:
            while not stop.is_set():
                most_fds[0] = max(most_fds[0], fds(proxy.pid))
                most_queued[0] = max(most_queued[0], accept_queue(proxy_port))
                time.sleep(0.1)

        threading.Thread(target=watch_fds, daemon=True).start()
        proxy_in_waits: list[tuple[float, float]] = []
        while time.time() < until + after:
            at, before = time.time() - start, proxy_time(proxy.pid)
            waits.append((at, newcomer(proxy_port)))
            after_wait = proxy_time(proxy.pid)
            proxy_in_waits.append((after_wait[0] - before[0], after_wait[1] - before[1]))
            time.sleep(max(0.0, 0.5 - waits[-1][1]))
        for p in procs:
            p.join()
        stop.set()
        time.sleep(0.5)
        reached = int(open(count_file).read() or 0) - base
        closed = closed_by_reason(metrics_port)
        log.seek(0)
        text = log.read()
        lines = [line.split(" ", 3)[-1][:100] for line in text.splitlines() if line.strip()]
        return Churned(
            seconds,
            made.value,
            reached,
            waits,
            proxy_in_waits,
            most_fds[0],
            most_queued[0],
            text.count("Too many open files") + text.count("out of file descriptors"),
            cpu_seconds(proxy.pid) - cpu_before,
            lines,
            closed,
        )
    finally:
        if proxy is not None:
            proxy.terminate()
            try:
                proxy.wait(15)
            except subprocess.TimeoutExpired:
                proxy.kill()
        for loop in loops:
            loop.kill()
            loop.wait(10)
        if counter is not None:
            counter.kill()
            counter.wait(10)
        broker.kill()
        broker.wait(10)
        log.close()
        for path in (f.name, log.name, count_file):
            os.unlink(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--after", type=float, default=5.0)
    parser.add_argument("--attackers", type=int, default=2)
    parser.add_argument("--sources", type=int, default=1, help="loopback source addresses of the attackers")
    parser.add_argument("--nofile", type=int, default=1024, help="the proxy's RLIMIT_NOFILE (0: as inherited)")
    parser.add_argument("--frames", type=int, default=FRAMES, help="Produce frames per connection (0: open/close)")
    parser.add_argument("--request", choices=REQUESTS, default="produce", help="what each connection sends")
    parser.add_argument("--rst", action="store_true", help="attackers reset their connections instead of closing")
    parser.add_argument("--max-wait", type=float, default=2.0)
    parser.add_argument("--starve", type=int, default=0, help="busy loops pinned to the proxy's one core")
    parser.add_argument("--nice", type=int, default=0, help="the proxy's nice value")
    parser.add_argument("--ip-rate", type=float, default=0.0, help="{ip: <default>} connection_creation_rate (0: none)")
    args = parser.parse_args()
    r = churn(
        args.seconds,
        args.after,
        args.attackers,
        args.sources,
        args.nofile or None,
        args.rst,
        args.frames,
        request=args.request,
        starve=args.starve,
        nice=args.nice,
        ip_rate=args.ip_rate,
    )
    print(
        f"churn: {args.attackers} attackers from {args.sources} address(es), {args.frames} {args.request} frame(s) "
        f"each, {'RST' if args.rst else 'FIN'}, "
        f"{args.seconds:g} s, proxy RLIMIT_NOFILE {args.nofile}"
        + (f", pinned to one core beside {args.starve} busy loop(s)" if args.starve else "")
        + (f", nice {args.nice}" if args.nice else "")
        + (f", {{ip: <default>}} connection_creation_rate {args.ip_rate:g}" if args.ip_rate else "")
    )
    print(f"  connections made by the attackers: {r.made:,} ({r.made / args.seconds:,.0f}/s)")
    print(
        f"  Produce frames that reached the broker: {r.reached:,} ({r.per_connection:.2f} per connection of "
        f"{args.frames:,} sent)"
    )
    print(
        f"  newcomer's wait for its first answer: worst {r.worst(True):.2f} s during the flood, "
        f"{r.worst(False):.2f} s in the {args.after:g} s after ({len(r.waits)} tries, "
        f"{sum(w >= GIVE_UP_S for _, w in r.waits)} unanswered)"
    )
    print(
        f"  newcomer's wait p50 / p99: {r.percentile(True, 0.5):.2f} / {r.percentile(True, 0.99):.2f} s during, "
        f"{r.percentile(False, 0.5):.2f} / {r.percentile(False, 0.99):.2f} s after"
    )
    print(
        f"  proxy: most descriptors open {r.most_fds}, 'Too many open files' in its log {r.fd_errors} times; most "
        f"connections in its kernel accept queue {r.most_queued}; CPU {r.cpu_s:.2f} s "
        f"({r.cpu_s * 1e6 / max(r.made, 1):.0f} us a connection)"
    )
    print(f"  of which connecting: worst {max(CONNECTED[1:]):.2f} s")
    print("  proxy's connections: " + ", ".join(f"{k} {v:,.0f}" for k, v in sorted(r.closed.items())))
    for line in sorted(set(r.log_lines), key=r.log_lines.count, reverse=True)[:3]:
        print(f"  log x{r.log_lines.count(line)}: {line}")
    ok = max(r.worst(True), r.worst(False)) <= args.max_wait and r.per_connection <= MAX_PER_GONE
    print("  OK" if ok else "  FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
