"""Consumer group members of three clients, for a group rebalancing in a loop and a calm group beside it
(tests/integration/kafka/test_request_rate_groups.py, bench/anchors_request_rate.py): librdkafka (confluent-kafka)
polled by its caller's thread, aiokafka on an event loop of its own, and Kafka's own Java consumer in a JVM of its own
(tests/integration/java/RebalancingMember.java). All speak the classic group protocol with the same timeouts and
assignor, so they can share one group; each tells the member id its group gave it, so that an eviction (a new id)
shows.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from pathlib import Path

GROUP_TIMEOUTS = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "max.poll.interval.ms": 6000}
CLOSE_S = 60.0  # a member's close: its LeaveGroup, past a JoinGroup the coordinator may hold (rebalance timeout)
ASSIGNOR = "roundrobin"  # aiokafka's only default: librdkafka members of the same group must offer it too
JAVA_MEMBER = Path(__file__).parent.parent / "java" / "RebalancingMember.java"  # its settings are GROUP_TIMEOUTS'


class RdMember:
    """A librdkafka consumer group member, polled by the test's thread; ``throttles``: what its connections were told
    (``throttle_cb``)."""

    def __init__(self, bootstrap: str, group: str, client_id: str, topics: list[str]) -> None:
        from confluent_kafka import Consumer

        self.client_id = client_id
        self.throttles: list[float] = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": client_id,
                "enable.auto.commit": False,
                "throttle_cb": lambda event: self.throttles.append(event.throttle_time),
                "partition.assignment.strategy": ASSIGNOR,
                **GROUP_TIMEOUTS,
            }
        )
        self.consumer.subscribe(topics)
        self.first_id = ""

    def poll(self) -> None:
        self.consumer.poll(0.02)
        self.first_id = self.first_id or self.consumer.memberid() or ""

    def member_id(self) -> str:
        return self.consumer.memberid() or ""

    def leave(self) -> None:
        """Leaves the group while the consumer is still polled: unsubscribes, then polls until its member id is gone
        (the revoke served, the LeaveGroup sent) and a poll finds nothing, so no rebalance event is left queued for
        the close.

        A rebalance event (an assignment whose SyncGroup answer came after the caller stopped polling) left for
        librdkafka's close can hang the whole process: the close serves it through confluent-kafka's rebalance
        callback, which holds the interpreter's lock (GIL) while it asks librdkafka's main thread for the rebalance
        protocol and then to assign. When the group has nothing to wait for (the member already left, after
        ``max.poll.interval.ms`` without a poll), the group ends at once, and a request queued just before its end
        and served just after is dropped unanswered (librdkafka#4884, #4041): the callback waits forever, with the
        GIL. Served here, the event finds the group alive."""
        self.consumer.unsubscribe()
        started = time.monotonic()
        # a poll returns at the first message or error (max.poll.interval.ms exceeded is one) before later events:
        # done when one finds nothing at all, the member gone
        while self.consumer.poll(0.05) is not None or self.consumer.memberid():
            assert time.monotonic() - started < CLOSE_S, f"{self.client_id} did not leave its group in {CLOSE_S:.0f} s"

    def close(self) -> None:
        """Leaves the group (:meth:`leave`), then closes the consumer, failing if librdkafka's close does not return
        in ``CLOSE_S``: a close left waiting fails this test by name instead of holding the worker. The close runs
        in a thread, which is left where it hangs (a hang that holds the GIL stops this thread too: the watchdog
        ends the worker then, with native stacks)."""
        self.leave()
        closing = threading.Thread(target=self.consumer.close, daemon=True)
        closing.start()
        closing.join(CLOSE_S)
        assert not closing.is_alive(), f"librdkafka's close of {self.client_id} did not return in {CLOSE_S:.0f} s"


class AioMember:
    """An aiokafka consumer group member on a loop of its own, in a thread; with ``flip`` it changes its subscription
    each time it has been assigned (a rebalance loop)."""

    def __init__(self, bootstrap: str, group: str, client_id: str, topics: list[str], flip: list[str] | None) -> None:
        self.bootstrap, self.group, self.client_id, self.topics, self.flip = bootstrap, group, client_id, topics, flip
        self.first_id = self.last_id = ""
        self.assigned = self.rejoins = 0
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self.thread.start()

    async def _run(self) -> None:
        from aiokafka import AIOKafkaConsumer

        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=self.client_id,
            enable_auto_commit=False,
            session_timeout_ms=GROUP_TIMEOUTS["session.timeout.ms"],
            heartbeat_interval_ms=GROUP_TIMEOUTS["heartbeat.interval.ms"],
            max_poll_interval_ms=GROUP_TIMEOUTS["max.poll.interval.ms"],
        )
        try:
            await consumer.start()
            consumer.subscribe(self.topics)
            subscribed = self.topics
            while not self.stop.is_set():
                await consumer.getmany(timeout_ms=20)
                member = consumer._coordinator.member_id  # aiokafka has no public accessor
                if member and member != "":
                    self.first_id = self.first_id or member
                    self.last_id = member
                if consumer.assignment():
                    self.assigned += 1
                    if self.flip is not None:
                        subscribed = self.flip if subscribed == self.topics else self.topics
                        consumer.subscribe(subscribed)
                        self.rejoins += 1
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            await consumer.stop()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        assert self.error is None, self.error


class JavaMember:
    """Kafka's Java consumer (tests/integration/java/RebalancingMember.java) in its own JVM; with ``flip`` it
    changes its subscription each time it has been assigned. What it prints is read into ``lines`` by a thread: one
    ``assigned MEMBER_ID GENERATION`` per assignment, ``lost MEMBER_ID`` if the group dropped it."""

    def __init__(self, cluster, bootstrap: str, group: str, client_id: str, topics: list[str], flip: list[str]) -> None:
        self.client_id = client_id
        command = cluster.java(str(JAVA_MEMBER), bootstrap, group, client_id, ",".join(topics), ",".join(flip))
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def member_ids(self, event: str) -> list[str]:
        return [line.split()[1] for line in list(self.lines) if line.startswith(f"{event} ")]

    def close(self, check: bool = True) -> None:
        """Its standard input closed: it leaves the group and exits; with ``check``, having done so cleanly."""
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.reader.join(10)
        if check:
            assert self.proc.returncode == 0 and "closed\n" in self.lines, "".join(self.lines)[-3000:]

    def __enter__(self) -> JavaMember:
        return self

    def __exit__(self, kind, *_) -> None:
        self.close(check=kind is None)  # not checked when the test failed already


def joined_in(bootstrap: str, group: str, topic: str) -> float:
    """Seconds a new librdkafka member of ``group`` takes from subscribing to being assigned, alone in its group."""
    member = RdMember(bootstrap, group, f"{group}-timed", [topic])
    started = time.monotonic()
    try:
        while not member.consumer.assignment():
            member.poll()
            assert time.monotonic() - started < 60, f"{group} never assigned"
        return time.monotonic() - started
    finally:
        member.close()
