"""The fault suite: faults injected around the proxy while real clients run through it, against Tansu (the restart
loop also against Apache Kafka, ``upstream``).

Each test is bounded in time and runs its faults for a few seconds in ``make test``; ``make soak`` sets
SOAK_SECONDS and the same tests inject faults for that long. Figures are printed on ``FAULTS`` lines (``-s``);
tests/RELIABILITY.md quotes them.

What can be tested honestly here: Tansu keeps its data in memory, so a broker restart loses every message and
"nothing acknowledged is lost across a broker restart" cannot be checked against it. The broker's side of a
failure is instead a relay between the proxy and Tansu whose connections are reset at once (the proxy sees its
broker connections die, as in a broker crash or a network fault, while the data survives). A broker that is down
and comes back empty is covered by ``test_failures.py::test_broker_down_and_back``. A connection flood with no limits configured is here; the
connection limits themselves are tested in ``test_connection_limits.py``.
"""

from __future__ import annotations

import signal
import socket
import time
import urllib.request
from collections import Counter

import pytest

from proxy.codec import messages as M
from proxy.codec.header import encode_request_header, frame
from tests.fuzz.frames import record_batch
from tests.harness import Tansu, free_port, proxy_config
from tests.integration import clients as c
from tests.integration.faults import (
    SOAK_SECONDS,
    CutRelay,
    PacedProducer,
    ProxyProcess,
    RssSampler,
    inject_faults,
    judge_restarts,
    nonblocking_send,
    phase_seconds,
    read_back,
    report,
    reset,
    wait_for_acks,
)
from tests.integration.raw import read_frame

pytestmark = pytest.mark.integration
MiB = 1 << 20


def _config(proxy_port: int, upstream_port: int, ops_port: int, **settings) -> dict:
    config = proxy_config(proxy_port, upstream_port, **settings)
    config["metrics"] = {"bind": f"127.0.0.1:{ops_port}"}  # the same port across restarts
    return config


# the safety net only (each wait inside is bounded): 41 s on kafka1 in a quiet make test; a CI run's first test on
# a cluster just started hit 90 s while reading the topic back
@pytest.mark.timeout(180 + 2 * SOAK_SECONDS)
@pytest.mark.parametrize(
    "upstream", ["tansu", pytest.param("kafka1", marks=pytest.mark.long_running(seconds=30))], indirect=True
)
def test_nothing_acknowledged_is_lost_or_duplicated_across_proxy_restarts_and_cut_broker_connections(
    upstream, tmp_path
):
    """A kafka-python producer (acks=all, no retries, no idempotence: it sends each value at most once) writes
    about 200 values a second to a 3-partition topic through a proxy process while, in turn, the proxy is stopped
    with SIGTERM and started again (graceful: in-flight requests finish first), its broker connections are all
    reset at once (through a relay in front of the broker), and it is killed with SIGKILL and started again (a crash:
    in-flight requests are lost, so their values are not acknowledged). After each fault the producer must get a
    value sent after the fault acknowledged within 15 s. At the end the topic is read back to its true end: every
    acknowledged value is at the offset the broker acknowledged it at, and no value is there twice (the client sent
    none twice, so a duplicate could only be the proxy's). Values that failed may or may not be in the topic (a
    request the broker wrote whose answer was lost): Kafka's at-most-once contract without retries. What Tansu cannot
    tell (its ListOffsets "latest" answers below the true end; it keeps data in memory) Kafka does, with acks=all and
    the broker's own offsets."""
    relay_port, ops_port = free_port(), free_port()
    with upstream.ports() as (proxy_port, broker_port):
        relay = CutRelay(broker_port, relay_port).start()
        proxy = ProxyProcess(
            _config(proxy_port, relay_port, ops_port, **{"shutdown.grace.period.ms": 3000}),
            str(tmp_path / "proxy.yaml"),
            proxy_port,
        )
        bootstrap = f"127.0.0.1:{proxy_port}"
        try:
            proxy.start()
            with upstream.topics(bootstrap, "faults", partitions=3) as (topic,):
                producer = PacedProducer(bootstrap, topic, "fault-producer")
                try:
                    producer.start()
                    assert wait_for_acks(producer, 0, 30) is not None, "traffic did not start"
                    started = time.monotonic()
                    faults, recoveries = inject_faults(proxy, relay, producer, phase_seconds(9))
                    label = "restarts_kafka" if upstream.kafka else "restarts"
                    judge_restarts(producer, bootstrap, topic, started, faults, recoveries, label)
                finally:
                    producer.stopping.set()
        finally:
            proxy.stop(signal.SIGKILL)
            relay.stop()


# -- misbehaving clients ------------------------------------------------------------------------------------


def _request(api_key: int, version: int, correlation_id: int, **fields) -> bytes:
    body = M.encode_request(api_key, version, M.new_request(api_key, version, **fields))
    return frame(encode_request_header(api_key, version, correlation_id, "misbehaving") + body)


def _fetch(correlation_id: int) -> bytes:
    """A Fetch of the preloaded topic from offset 0: about 4 MiB of answer (Tansu answers a Fetch with
    max_wait_ms=0 with no data, so it waits up to 500 ms, and returns at once since the data is there)."""
    return _request(
        1,
        12,
        correlation_id,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=4 * MiB,
        topics=[{"topic": "big", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 4 * MiB}]}],
    )


def _produce(correlation_id: int) -> bytes:
    return _request(
        0,
        9,
        correlation_id,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            {"name": "junk", "partition_data": [{"index": 0, "records": record_batch(producer_id=-1, records=20)}]}
        ],
    )


def _api_versions(correlation_id: int) -> bytes:
    return _request(18, 3, correlation_id, client_software_name="slow", client_software_version="1")


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _preload(bootstrap: str, topic: str, count: int, size: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="preload", acks=1, linger_ms=20)
    try:
        for i in range(count):
            producer.send(topic, value=(b"%08d" % i) * (size // 8))
        producer.flush(60)
    finally:
        producer.close(10)


SLOW_READERS = 8


def _metric(ops_port: int, name: str) -> float:
    """The sum of a metric's samples, as Prometheus would scrape it from the proxy process."""
    with urllib.request.urlopen(f"http://127.0.0.1:{ops_port}/metrics", timeout=5) as r:
        lines = r.read().decode().splitlines()
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(name + "{") or line.startswith(name + " ")
    )


@pytest.mark.timeout(90 + 2 * SOAK_SECONDS)
def test_slow_readers_half_sent_frames_and_disconnects_leave_memory_bounded_and_others_unaffected(tmp_path):
    """A proxy process with its default bounds (200 requests in flight and 1 MiB of unread answers per
    connection). While a kafka-python producer (acks=all, about 200 values a second) writes through it on its own
    connection, misbehaving clients:

    - slow readers: 8 connections each pipelining ApiVersions and Fetch requests (each answered with up to 4 MiB
      of a preloaded topic) and never reading an answer;
    - half-sent frames: connections that send 2 bytes of a size prefix, a size and half a header, or a whole
      header and half a Produce body, then nothing;
    - mid-request disconnects, over and over for the whole phase: a Fetch sent then the connection reset before
      the answer, half a Produce then close, a whole Produce then close before the answer.

    The proxy's resident memory (VmRSS) must stay within 64 MiB of what it was with only the producer (the slow
    readers alone may hold 8 x ~4 MiB: the 1 MiB bound plus one read of answers and the transport's high-water
    mark), the producer must never wait more than 2 s for an acknowledgement, every acknowledged value is read back
    exactly once, and a new client is served at the end. Under ``make soak`` the memory of the last third of the
    phase must also be within 16 MiB of the first third's (no leak per fault)."""
    broker_port, proxy_port, ops_port = free_port(), free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    proxy = ProxyProcess(_config(proxy_port, broker_port, ops_port), str(tmp_path / "proxy.yaml"), proxy_port)
    bootstrap = f"127.0.0.1:{proxy_port}"
    producer = PacedProducer(bootstrap, "good", "good-producer")
    sampler = RssSampler(proxy)
    sockets: list[socket.socket] = []
    faults: Counter = Counter()
    try:
        proxy.start()
        for topic in ("big", "good", "junk"):
            c.kp_create_topic(bootstrap, topic, 1)
        _preload(bootstrap, "big", 4000, 1024)
        producer.start()
        assert wait_for_acks(producer, 0, 30) is not None, "traffic did not start"
        sampler.start()
        time.sleep(2.0)  # deliberate: a baseline of the producer's pauses before any fault
        baseline = sampler.peak(time.monotonic() - 1.5)

        started = time.monotonic()
        pipeline = b"".join(_api_versions(n) if n % 2 else _fetch(n) for n in range(400))
        for _ in range(SLOW_READERS):
            s = _connect(proxy_port)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            nonblocking_send(s, pipeline)
            sockets.append(s)
            faults["slow_reader"] += 1
        produce = _produce(1)
        for cut in (2, 4 + 6, len(produce) // 2):
            for _ in range(4):
                s = _connect(proxy_port)
                s.sendall(produce[:cut])
                sockets.append(s)
                faults["half_sent_frame"] += 1
        end = started + phase_seconds(10)
        n = 0
        while time.monotonic() < end:
            n += 1
            s = _connect(proxy_port)
            s.sendall(_fetch(n))
            reset(s)
            s = _connect(proxy_port)
            s.sendall(produce[: len(produce) // 2])
            s.close()
            s = _connect(proxy_port)
            s.sendall(_produce(n))
            s.close()
            faults["mid_request_disconnect"] += 3
            time.sleep(0.05)  # deliberate: the pace of the faults, beside the running producer
        finished = time.monotonic()
        pause = producer.longest_pause(started, finished)
        peak = sampler.peak(started, finished)
        bound_reached = _metric(ops_port, "kafka_quota_proxy_connection_inflight_bound_reached_total")

        fresh = _connect(proxy_port)
        fresh.sendall(_api_versions(7))
        assert int.from_bytes(read_frame(fresh)[:4], "big") == 7, "a new client is not served"
        fresh.close()
        for s in sockets:
            s.close()
        producer.stopping.set()
        producer.join(60)
        assert producer.error is None, repr(producer.error)
        acked = [v for _, v in producer.acked]
        seen = read_back(bootstrap, "good", producer.acked_ends())
        third = (finished - started) / 3
        first, last = sampler.peak(started, started + third), sampler.peak(finished - third, finished)
        report(
            "misbehaving",
            seconds=round(finished - started, 1),
            faults=dict(faults),
            baseline_rss_mib=round(baseline / MiB, 1),
            peak_rss_mib=round(peak / MiB, 1),
            peak_growth_mib=round((peak - baseline) / MiB, 1),
            first_third_peak_mib=round(first / MiB, 1),
            last_third_peak_mib=round(last / MiB, 1),
            longest_pause_s=round(pause, 3),
            sent=producer.sent,
            acked=len(acked),
            failed=producer.failed,
            read_back=sum(seen.values()),
            inflight_bound_reached=bound_reached,
        )
        assert bound_reached >= SLOW_READERS, "the slow readers never filled their in-flight bound"
        assert peak - baseline < 64 * MiB, f"RSS grew by {(peak - baseline) / MiB:.1f} MiB"
        assert pause < 2.0, f"the well-behaved producer waited {pause:.2f} s for an acknowledgement"
        assert producer.failed == 0
        assert [v for v in acked if seen[v] != 1] == []
        if SOAK_SECONDS:
            assert last <= first + 16 * MiB, f"RSS crept from {first / MiB:.1f} to {last / MiB:.1f} MiB"
    finally:
        producer.stopping.set()
        sampler.stopping.set()
        for s in sockets:
            s.close()
        proxy.stop(signal.SIGKILL)
        broker.stop()


FLOOD_CONNECTIONS = 3000
FLOOD_CONCURRENCY = 200


# A wait against real time (the producer's 2 s), so a measurement (tests/conftest.py): the proxy, Tansu, the producer
# and the flood, all started by the test, run at the measurements' priority. At normal priority beside the raised
# measurements a full make test once saw a 2.23 s wait.
@pytest.mark.measures_rate
@pytest.mark.timeout(60 + 2 * SOAK_SECONDS)
def test_a_connection_flood_from_one_address_leaves_a_producer_unaffected(tmp_path):
    """No connection limits configured (the defaults): FLOOD_CONNECTIONS connections (more under ``make soak``),
    at most FLOOD_CONCURRENCY open at once, from 127.0.0.2, each sending an ApiVersions request and closing without
    waiting, while a kafka-python producer (its own connection from 127.0.0.1: kafka-python cannot choose its
    source address) keeps producing. The producer never waits 2 s for an acknowledgement, loses nothing, and the
    proxy's memory stays bounded; every flood connection is accepted and closed again."""
    import asyncio

    broker_port, proxy_port, ops_port = free_port(), free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    proxy = ProxyProcess(_config(proxy_port, broker_port, ops_port), str(tmp_path / "proxy.yaml"), proxy_port)
    bootstrap = f"127.0.0.1:{proxy_port}"
    producer = PacedProducer(bootstrap, "flood-good", "flood-producer")
    sampler = RssSampler(proxy)
    request = frame(encode_request_header(18, 0, 1, "flood"))
    try:
        proxy.start()
        c.kp_create_topic(bootstrap, "flood-good", 1)
        producer.start()
        assert wait_for_acks(producer, 0, 30) is not None, "traffic did not start"
        baseline = proxy.rss_bytes()
        sampler.start()
        total = int(FLOOD_CONNECTIONS * max(1.0, SOAK_SECONDS / 5))

        async def flood() -> int:
            gate = asyncio.Semaphore(FLOOD_CONCURRENCY)
            done = 0

            async def one() -> None:
                nonlocal done
                async with gate:
                    try:
                        _, writer = await asyncio.wait_for(
                            asyncio.open_connection("127.0.0.1", proxy_port, local_addr=("127.0.0.2", 0)), 10
                        )
                    except (TimeoutError, OSError):
                        return
                    writer.write(request)
                    writer.close()
                    done += 1

            await asyncio.gather(*(one() for _ in range(total)))
            return done

        started = time.monotonic()
        opened = asyncio.run(flood())
        finished = time.monotonic()
        time.sleep(1)  # deliberate: a second after the flood in which the producer's pause would show
        pause = producer.longest_pause(started, finished + 1)
        producer.stopping.set()
        producer.join(60)
        sampler.stopping.set()
        assert producer.error is None, repr(producer.error)
        acked = [v for _, v in producer.acked]
        seen = read_back(bootstrap, "flood-good", producer.acked_ends())
        peak = sampler.peak()
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{ops_port}/metrics", timeout=5).read().decode()
        accepted = sum(
            float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line.startswith("kafka_quota_proxy_connections_accepted_total{")
        )
        report(
            "connection_flood",
            flood_connections=opened,
            seconds=round(finished - started, 1),
            longest_pause_s=round(pause, 3),
            baseline_rss_mib=round(baseline / 2**20, 1),
            peak_rss_mib=round(peak / 2**20, 1),
            acknowledged=len(acked),
        )
        assert opened == total
        assert accepted >= total
        assert pause < 2.0, f"the producer waited {pause:.2f} s for an acknowledgement during the flood"
        assert producer.failed == 0 and [v for v in acked if seen[v] != 1] == []
        assert peak - baseline < 64 * 2**20, f"RSS grew by {(peak - baseline) / 2**20:.1f} MiB"
    finally:
        producer.stopping.set()
        sampler.stopping.set()
        proxy.stop()
        broker.stop()
