"""Where a small request's CPU goes in the proxy's real process (issue 46): user and kernel time, system calls and
event-loop wake-ups per request, and optionally a sampled profile of the whole process.

One broker (Apache Kafka 4.4.0 from the project's jars, or Tansu with ``--broker tansu``: lighter, for profiling on a
busy machine) and the proxy as bench/anchors_kroxylicious.py runs it: cluster mode, issue 46's quotas configured and
never binding. One of that script's librdkafka workloads runs through it, ``--workload single`` (one-message Produce
requests) or ``group`` (a consumer group of 10 polling 100 partitions), and the proxy process is watched:

- its CPU (user + system, /proc/PID/stat) per request over the workload's measured part (a group's joining left
  out, as bench/anchors_kroxylicious.py leaves it out), the clients' own count of requests;
- ``--strace``: its system calls per request (``strace -c -f``; slows it, so CPU figures of that run mean nothing),
  the event loop's wake-ups being its ``epoll_wait`` calls;
- ``--perf FILE``: ``perf record -g`` of the process for the measured interval, then the share of each shared
  object (the interpreter, the event loop, the kernel) and the hottest symbols;
- ``--profile FILE``: the proxy run under cProfile timed by its main thread's CPU time (bench/cpu_profile.py: a
  wall-clock profile on a loaded machine charges the waits for a core to the writes that woke the peers; slower:
  compare only profiles with each other), its top functions by own time printed when it stops.

- ``--instructions``: the proxy run under callgrind (bench/callgrind.py), counting only while the measured part runs:
  its instructions per request, the figure the machine's load does not move (about 50 x slower, so the workload's
  own pace and every CPU figure of that run change; the count per request stays within a few % from run to run, the
  group's most, its mix of Fetch, heartbeat and commit requests moving with the pace).

``--relay kroxylicious`` watches Kroxylicious (bench/kroxylicious.py, Kafka only) the same way instead of the proxy,
for the peer's user and kernel time and system calls per request (``--profile`` is the proxy's alone). Its CPU here
leaves out its JIT compiler's threads, as bench/anchors_kroxylicious.py does; ``--warm-up N`` first sends N
one-message Produce requests, not measured (a JVM's first requests run interpreted). ``--pin`` runs the relay alone
on the last CPU and the broker and the clients on the others: on one machine a relay's send wakes the broker on
the same core, which then preempts the relay (or not, as the scheduler sees each), a figure a broker on another
machine does not have.

Usage: ``python bench/request_profile.py [--broker kafka|tansu] [--relay proxy|kroxylicious]
[--workload single|group] [--small 20000] [--warm-up 0] [--pin] [--strace] [--perf /tmp/proxy.perf]
[--profile /tmp/proxy.prof] [--instructions [--callgrind-out FILE]]``
"""

from __future__ import annotations

import argparse
import os
import pstats
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench.anchors_common import ProxyProcess, compiler_user_system_seconds, load, user_system_seconds  # noqa: E402
from bench.anchors_kroxylicious import GROUP_PARTITIONS, QUOTAS  # noqa: E402
from bench.callgrind import instrument, total  # noqa: E402
from bench.common import free_port, stop_processes, tansu, wait_for_port  # noqa: E402
from bench.kroxylicious import KroxyliciousProcess  # noqa: E402
from bench.rdkafka_workloads import group_polling, produce_single  # noqa: E402
from tests.harness import cluster_ports  # noqa: E402
from tests.kafka_cluster import KafkaCluster  # noqa: E402


def working(pid: int) -> tuple[float, float]:
    """The process's user and system CPU seconds less a JVM's JIT compiler threads' (none in the proxy), as
    bench/anchors_kroxylicious.py leaves them out."""
    (user, system), (compiler_user, compiler_system) = user_system_seconds(pid), compiler_user_system_seconds(pid)
    return user - compiler_user, system - compiler_system


def switches_faults(pid: int) -> tuple[int, int, int]:
    """The process's context switches, voluntary (it slept: a wait for the sockets) and not (preempted), summed over
    its threads, and its minor page faults (/proc/PID/stat: threads included)."""
    voluntary = involuntary = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        voluntary += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        involuntary += int(line.split()[1])
        except OSError:  # a thread that ended meanwhile
            continue
    with open(f"/proc/{pid}/stat") as f:
        faults = int(f.read().rsplit(")", 1)[1].split()[7])
    return voluntary, involuntary, faults


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


def pin(relay: int, broker: int) -> None:
    """Every thread of the relay on the last CPU; the broker's, and this process's (its client threads, started
    later, inherit it), on the others."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("--pin needs two CPUs or more")
    for pid, allowed in ((relay, {cpus[-1]}), (broker, set(cpus[:-1])), (os.getpid(), set(cpus[:-1]))):
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                os.sched_setaffinity(int(task), allowed)
            except ProcessLookupError:  # a thread that ended meanwhile
                pass


def watchers(pid: int, args) -> list[tuple[str, subprocess.Popen]]:
    started = []
    if args.strace:
        out = tempfile.NamedTemporaryFile(suffix=".strace", delete=False).name
        command = ["strace", "-c", "-f", "-o", out, "-p", str(pid)]
        started.append((out, subprocess.Popen(command, stderr=subprocess.DEVNULL)))
    if args.perf:
        command = ["perf", "record", "-F", "1999", "-g", "-o", args.perf, "-p", str(pid)]
        started.append((args.perf, subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
    return started


def strace_counts(path: str) -> dict[str, int]:
    calls = {}
    with open(path) as f:
        for line in f:
            row = line.split()
            if len(row) >= 5 and row[-1].isidentifier() and row[3].isdigit() and row[-1] != "total":
                calls[row[-1]] = int(row[3])
    return calls


def perf_summary(path: str) -> None:
    for sort, top in (("dso", 8), ("dso,sym", 25)):
        report = subprocess.run(
            ["perf", "report", "-i", path, "--stdio", "--no-children", "--sort", sort, "-g", "none"],
            capture_output=True,
            text=True,
        ).stdout
        rows = [line for line in report.splitlines() if line.strip() and not line.startswith("#")]
        print(f"  perf, by {sort}:")
        for line in rows[:top]:
            print("   ", line.rstrip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--broker", choices=("kafka", "tansu"), default="kafka")
    parser.add_argument("--relay", choices=("proxy", "kroxylicious"), default="proxy", help="the process watched")
    parser.add_argument("--workload", choices=("single", "group"), default="single")
    parser.add_argument("--small", type=int, default=20_000, help="single: one-message Produce requests")
    parser.add_argument("--warm-up", type=int, default=0, help="one-message Produce requests before, not measured")
    parser.add_argument("--group-seconds", type=float, default=10.0)
    parser.add_argument("--consumers", type=int, default=10)
    parser.add_argument("--strace", action="store_true", help="count the proxy's system calls (slows it)")
    parser.add_argument("--perf", metavar="FILE", help="perf record the proxy process into FILE")
    parser.add_argument("--profile", metavar="FILE", help="run the proxy under cProfile, its output in FILE")
    parser.add_argument("--instructions", action="store_true", help="count the proxy's instructions (callgrind)")
    parser.add_argument("--callgrind-out", metavar="FILE", help="with --instructions: keep callgrind's counts in FILE")
    parser.add_argument("--inflight", type=int, help="the proxy's connections.max.inflight.requests (its default)")
    parser.add_argument(
        "--pin",
        action="store_true",
        help="the relay alone on the last CPU, the broker and the clients on the others (as with a broker on "
        "another machine: nothing it wakes runs on the relay's core)",
    )
    args = parser.parse_args()
    if args.relay == "kroxylicious" and (args.broker != "kafka" or args.profile or args.instructions):
        parser.error("--relay kroxylicious runs in front of --broker kafka, without --profile or --instructions")
    if args.instructions and (args.profile or args.perf or args.strace):
        parser.error("--instructions runs the proxy under callgrind alone")
    cluster = broker = None
    proxy_port, base = cluster_ports(4)
    if args.broker == "kafka":
        cluster = KafkaCluster(1, "request-profile").start()
        upstream = cluster.nodes[0].direct
        node_id = cluster.nodes[0].node_id
    else:
        broker_port = free_port()
        broker = tansu(broker_port, broker_port)
        upstream, node_id = f"127.0.0.1:{broker_port}", None
    python = [str(Path(__file__).resolve().with_name("cpu_profile.py")), args.profile] if args.profile else []
    counted = tempfile.NamedTemporaryFile(suffix=".callgrind", delete=False).name if args.instructions else None
    if counted is not None:
        python = [str(Path(__file__).resolve().with_name("callgrind.py")), counted]
    settings = {} if args.inflight is None else {"connections.max.inflight.requests": args.inflight}
    if args.relay == "kroxylicious":
        proxy = KroxyliciousProcess(proxy_port, upstream, Path(cluster.directory) / "kroxylicious").start()
    else:
        proxy = ProxyProcess(proxy_port, upstream, QUOTAS, settings, broker_port_base=base, python=python).start()
    try:
        if node_id is not None:
            wait_for_port(
                proxy_port + 1 + node_id if args.relay == "kroxylicious" else base + node_id,
                300 if counted is not None else 60,
            )
        bootstrap = f"127.0.0.1:{proxy_port}"
        pid = proxy.proc.pid
        if args.pin:
            broker_pid = cluster.nodes[0].proc.pid if cluster is not None else broker.pid
            pin(pid, broker_pid)
        topic = f"profiled-{args.workload}"
        create(upstream, topic, 1 if args.workload == "single" else GROUP_PARTITIONS)
        marks: list[tuple[float, float]] = []
        counts: list[tuple[int, int, int]] = []
        started: list[tuple[str, subprocess.Popen]] = []

        def mark() -> float:
            """The workload's ``cpu``, called as its measured part starts and ends: the watchers start at the first,
            so a group's joining (and the codec compiled for its first requests) is left out, as the anchors do."""
            if not marks:
                started.extend(watchers(pid, args))
            if counted is not None:
                instrument("off" if marks else "on", pid)
            marks.append(working(pid))
            counts.append(switches_faults(pid))
            return 0.0

        if args.warm_up:
            produce_single(bootstrap, topic, args.warm_up, lambda: 0.0)
        if args.workload == "single":
            outcome = produce_single(bootstrap, topic, args.small, mark)
            requests = args.small
        else:
            outcome = group_polling(
                bootstrap, topic, "profiled", args.consumers, GROUP_PARTITIONS, args.group_seconds, mark
            )
            requests = outcome.requests
        (u0, s0), (u1, s1) = marks[0], marks[-1]
        for _, watcher in started:
            watcher.send_signal(signal.SIGINT)
            watcher.wait(60)
        print(
            f"{args.workload} through {args.relay} in front of {args.broker}: {requests} requests in "
            f"{outcome.seconds:.1f} s ({requests / outcome.seconds:.0f}/s); its CPU per request "
            f"{(u1 - u0 + s1 - s0) / requests * 1e6:.1f} us ({(u1 - u0) / requests * 1e6:.1f} user, "
            f"{(s1 - s0) / requests * 1e6:.1f} kernel); load {load()}"
        )
        (v0, i0, f0), (v1, i1, f1) = counts[0], counts[-1]
        print(
            f"  per request: {(v1 - v0) / requests:.2f} voluntary context switches (waits), {(i1 - i0) / requests:.2f}"
            f" involuntary (preempted), {(f1 - f0) / requests:.2f} minor page faults"
        )
        for path, _ in started:
            if path.endswith(".strace"):
                calls = strace_counts(path)
                os.unlink(path)
                top = sorted(calls.items(), key=lambda kv: -kv[1])[:8]
                print(
                    f"  system calls per request: {sum(calls.values()) / requests:.2f} ("
                    + ", ".join(f"{name} {n / requests:.2f}" for name, n in top)
                    + ")"
                )
            else:
                perf_summary(path)
    finally:
        proxy.stop()
        if cluster is not None:
            cluster.stop()
        if broker is not None:
            stop_processes([broker])
    if args.profile and Path(args.profile).exists():
        pstats.Stats(args.profile).sort_stats("tottime").print_stats(30)
    if counted is not None:  # written by callgrind as the proxy exited
        instructions = total(counted)
        if args.callgrind_out:  # for callgrind_annotate: where the instructions went
            os.replace(counted, args.callgrind_out)
        else:
            os.unlink(counted)
        print(f"  instructions per request (callgrind): {instructions / requests:,.0f} ({instructions:,} in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
