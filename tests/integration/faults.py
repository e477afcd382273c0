"""Helpers of the fault suite (``test_faults.py``): the proxy as an operator runs it (its own process), a relay
whose connections can be cut, a paced kafka-python producer that remembers what was acknowledged and when, a
VmRSS sampler, and reading a topic back.

``SOAK_SECONDS`` (``make soak``) stretches every fault phase to that many seconds; unset, the short suite runs.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import Counter

import yaml

from tests.harness import wait_for_port
from tests.relay import pipe

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOAK_SECONDS = float(os.environ.get("SOAK_SECONDS", "0"))


def phase_seconds(short: float) -> float:
    """How long a test injects faults: ``short`` in ``make test``, SOAK_SECONDS under ``make soak``."""
    return max(short, SOAK_SECONDS)


def report(test: str, **figures) -> None:
    """One line of measured figures (shown with ``pytest -s``; RELIABILITY.md quotes them)."""
    print(f"\nFAULTS {test}: " + ", ".join(f"{k}={v}" for k, v in figures.items()), flush=True)


class ProxyProcess:
    """``python -m proxy.cli run --config FILE``: started, stopped with SIGTERM (graceful) or SIGKILL (a crash)."""

    def __init__(self, config: dict, path: str, port: int) -> None:
        with open(path, "w") as f:
            yaml.safe_dump(config, f)
        self.path = path
        self.port = port
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "proxy.cli", "run", "--config", self.path, "--log-level", "ERROR"], cwd=ROOT
        )
        wait_for_port(self.port, timeout=30)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            return None

    def rss_bytes(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0


class RssSampler(threading.Thread):
    """VmRSS of a process every 50 ms: (monotonic time, bytes) samples."""

    def __init__(self, proxy: ProxyProcess) -> None:
        super().__init__(daemon=True, name="rss")
        self.proxy = proxy
        self.samples: list[tuple[float, int]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.samples.append((time.monotonic(), self.proxy.rss_bytes()))
            except (OSError, ValueError):
                pass
            self.stopping.wait(0.05)

    def peak(self, since: float = 0.0, until: float = float("inf")) -> int:
        return max((rss for t, rss in self.samples if since <= t <= until), default=0)


class CutRelay:
    """A TCP relay standing between the proxy and the broker; :meth:`cut` resets every connection through it at
    once (as a broker crash or a network fault would, seen from the proxy) while the broker keeps its data."""

    def __init__(self, target_port: int, port: int) -> None:
        self.target_port = target_port
        self.port = port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="cut-relay", daemon=True)
        self._writers: set[asyncio.StreamWriter] = set()
        self._server = None

    def start(self) -> CutRelay:
        self._thread.start()
        self._server = self._call(asyncio.start_server(self._handle, "127.0.0.1", self.port))
        return self

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    async def _handle(self, reader, writer) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers -= {writer, up_writer}

    def cut(self) -> int:
        """Reset every open connection; return how many connection pairs were cut."""

        async def cut():
            writers = list(self._writers)
            for w in writers:
                w.transport.abort()
            return len(writers) // 2

        return self._call(cut())

    def stop(self) -> None:
        async def close():
            self._server.close()
            for w in list(self._writers):
                w.transport.abort()

        self._call(close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


class PacedProducer(threading.Thread):
    """kafka-python, ``acks=all``, no retries and no idempotence: each value is sent at most once, so a value twice
    in the topic can only come from what is between the client and the broker. Sends ``<label>-<n>`` at about
    ``pace`` a second until stopped; remembers every acknowledged value and when."""

    def __init__(self, bootstrap: str, topic: str, label: str, pace: int = 200) -> None:
        super().__init__(daemon=True, name=label)
        self.bootstrap, self.topic, self.label, self.pace = bootstrap, topic, label, pace
        self.sent = 0
        self.acked: list[tuple[float, str]] = []
        self.placed: dict[str, tuple[int, int]] = {}  # acknowledged value -> (partition, offset) the broker gave it
        self.failed = 0
        self.error: BaseException | None = None
        self.stopping = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        from kafka import KafkaProducer

        try:
            producer = KafkaProducer(
                bootstrap_servers=self.bootstrap,
                client_id=self.label,
                acks="all",
                retries=0,
                enable_idempotence=False,
                linger_ms=5,
                request_timeout_ms=5000,
                reconnect_backoff_ms=50,
                reconnect_backoff_max_ms=500,
                max_block_ms=10000,
            )
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
            return
        try:
            start = time.monotonic()
            while not self.stopping.is_set():
                value = f"{self.label}-{self.sent}"
                future = producer.send(self.topic, value=value.encode())
                future.add_callback(self._acked, value)
                future.add_errback(self._failed)
                self.sent += 1
                delay = start + self.sent / self.pace - time.monotonic()
                if delay > 0:
                    time.sleep(delay)  # deliberate: paced at ``pace`` messages a second
            producer.flush(30)
        except BaseException as exc:  # noqa: BLE001
            self.error = exc
        finally:
            producer.close(10)

    def _acked(self, value: str, metadata) -> None:
        with self._lock:
            self.acked.append((time.monotonic(), value))
            self.placed[value] = (metadata.partition, metadata.offset)

    def acked_ends(self) -> dict[int, int]:
        """Per partition, one past the highest offset acknowledged: the topic's true end is at least there."""
        with self._lock:
            ends: dict[int, int] = {}
            for partition, offset in self.placed.values():
                ends[partition] = max(ends.get(partition, 0), offset + 1)
            return ends

    def unaccounted(self, records: dict[tuple[int, int], str]) -> list[str]:
        """Each acknowledged value not at the offset it was acknowledged at, with what the topic holds there:
        another value (an answer handed to the wrong request) or nothing (lost)."""
        with self._lock:
            placed = dict(self.placed)
        wrong = []
        for value, (partition, offset) in sorted(placed.items(), key=lambda item: item[1]):
            found = records.get((partition, offset))
            if found != value:
                held = f"holds {found!r}" if found is not None else "holds nothing"
                wrong.append(f"{value} acknowledged at partition {partition} offset {offset}, which {held}")
        return wrong

    def _failed(self, _exc) -> None:
        with self._lock:
            self.failed += 1

    def ack_times(self) -> list[float]:
        with self._lock:
            return [t for t, _ in self.acked]

    def longest_pause(self, since: float, until: float) -> float:
        """The longest time without an acknowledgement between ``since`` and ``until``."""
        times = [since] + [t for t in self.ack_times() if since < t < until] + [until]
        return max(b - a for a, b in zip(times, times[1:]))


def wait_for_acks(producer: PacedProducer, after_sent: int, timeout: float) -> float | None:
    """When the first value sent after ``after_sent`` values was acknowledged (None: not within ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if producer.error is not None:
            raise producer.error
        for t, value in list(producer.acked):
            if int(value.rsplit("-", 1)[1]) >= after_sent:
                return t
        time.sleep(0.05)  # a bounded condition wait returning the acknowledgement's time (or None)
    return None


def inject_faults(
    proxy: ProxyProcess, relay: CutRelay, producer: PacedProducer, seconds: float
) -> tuple[Counter, list[float]]:
    """In turn, for ``seconds`` and each at least once: the proxy stopped with SIGTERM and started again (graceful),
    its broker connections all reset at once (``relay``), the proxy killed with SIGKILL and started again (a crash).
    After each fault a value sent after it must be acknowledged within 15 s. Returns the faults counted and the
    seconds each took to recover."""
    faults: Counter = Counter()
    recoveries: list[float] = []
    end = time.monotonic() + seconds
    kinds = ("sigterm", "cut", "sigkill")
    while sum(faults.values()) < len(kinds) or time.monotonic() < end:
        kind = kinds[sum(faults.values()) % len(kinds)]
        at = time.monotonic()
        if kind == "cut":
            assert relay.cut() >= 1, "the proxy had no broker connection to cut"
        else:
            exit_code = proxy.stop(signal.SIGTERM if kind == "sigterm" else signal.SIGKILL)
            if kind == "sigterm":
                assert exit_code == 0, f"SIGTERM: exit code {exit_code}"
            proxy.start()
        faults[kind] += 1
        acked_at = wait_for_acks(producer, producer.sent, 15)
        assert acked_at is not None, f"no value acknowledged within 15 s of fault {kind}"
        recoveries.append(acked_at - at)
        time.sleep(1.0)  # deliberate: traffic between faults
    return faults, recoveries


def read_topic(
    bootstrap: str, topic: str, ends_at_least: dict[int, int] | None = None, timeout: float = 30.0
) -> dict[tuple[int, int], str]:
    """Every record of the topic, (partition, offset) -> value, read from the beginning of every partition to its end:
    the end the broker reports or, where the producer was acknowledged further (``ends_at_least``), there. Never a
    count of records: Tansu's ListOffsets "latest" answers below the true end (1033/974/934 for acknowledged ends
    1036/974/990), and a read that stopped once it had seen as many values as were acknowledged stopped short when
    unacknowledged values the broker did write made up the count. Fails, naming the partitions, if the ends cannot
    be reached within ``timeout``."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="fault-reader", enable_auto_commit=False)
    records: dict[tuple[int, int], str] = {}
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        reported = consumer.end_offsets(partitions)
        ends = {tp: max(reported[tp], (ends_at_least or {}).get(tp.partition, 0)) for tp in partitions}
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            if time.monotonic() > deadline:
                short = {
                    tp.partition: (consumer.position(tp), ends[tp])
                    for tp in partitions
                    if consumer.position(tp) < ends[tp]
                }
                raise AssertionError(f"{topic}: (position, end) of partitions not read to their end: {short}")
            for batch in consumer.poll(500).values():
                records.update(((r.partition, r.offset), r.value.decode()) for r in batch)
    finally:
        consumer.close()
    return records


def read_back(
    bootstrap: str, topic: str, ends_at_least: dict[int, int] | None = None, timeout: float = 30.0
) -> Counter:
    """Every value in the topic, counted (:func:`read_topic`)."""
    return Counter(read_topic(bootstrap, topic, ends_at_least, timeout).values())


def judge_restarts(
    producer: PacedProducer,
    bootstrap: str,
    topic: str,
    started: float,
    faults: Counter,
    recoveries: list[float],
    label: str,
) -> None:
    """Stop the producer and read the topic back to its true end: every acknowledged value is at the offset it was
    acknowledged at (or the message says what is there instead), no value is there twice (the client sent none
    twice, so a duplicate could only be the proxy's), and nothing else is there."""
    finished = time.monotonic()
    producer.stopping.set()
    producer.join(60)
    assert producer.error is None, repr(producer.error)
    acked = [v for _, v in producer.acked]
    records = read_topic(bootstrap, topic, producer.acked_ends())
    seen = Counter(records.values())
    missing = producer.unaccounted(records)
    twice = [v for v, n in seen.items() if n > 1]
    strangers = [v for v in seen if not v.startswith(producer.label + "-")]
    report(
        label,
        seconds=round(finished - started, 1),
        faults=dict(faults),
        sent=producer.sent,
        acked=len(acked),
        failed=producer.failed,
        read_back=sum(seen.values()),
        unacked_but_written=len(set(seen) - set(acked)),
        missing=len(missing),
        duplicated=len(twice),
        longest_recovery_s=round(max(recoveries), 2),
        longest_pause_s=round(producer.longest_pause(started, finished), 2),
    )
    assert not missing, f"{len(missing)} acknowledged values not where they were acknowledged: {missing[:5]}"
    assert not twice, f"{len(twice)} values written twice, e.g. {twice[:5]}"
    assert not strangers, strangers[:5]


def nonblocking_send(sock: socket.socket, data: bytes) -> int:
    """Send what the kernel takes now, without waiting; return how many bytes went."""
    sock.setblocking(False)
    sent = 0
    try:
        while sent < len(data):
            sent += sock.send(data[sent:])
    except (BlockingIOError, InterruptedError):
        pass
    except OSError:
        pass
    return sent


def reset(sock: socket.socket) -> None:
    """Close with a TCP reset (SO_LINGER 0), as a crashing client would."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
