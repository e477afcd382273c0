"""Splicing (``connections.splice: auto``): the rest of large streamed frames moves socket to socket in the kernel.

Real clients against Tansu, default settings: large produces and fetches over many partitions with many requests
in flight, every message compared, and ``kafka_quota_proxy_spliced_bytes_total`` read to show the bytes did go
through the splice path (so these tests fail if it is never taken). Then the stream cut in the middle of a
splice: a client that closes (FIN, then RST) half-way through a large request, against Tansu; and a broker that
closes half-way through a large response, which Tansu cannot be made to do, so a scripted broker
(``tests/scripted_broker.py``) sends it.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import threading
import time
from collections import defaultdict

import pytest

from proxy.codec.header import encode_request_header, encode_response_header, frame
from proxy.connection.splice import splice_supported
from tests.harness import Tansu, free_port, proxy_config, proxy_in_front, start_proxy, wait_until
from tests.integration.clients import ck_produce
from tests.integration.faults import reset
from tests.integration.os_sockets import SIOCINQ, SIOCOUTQ, queued, tcp_socket
from tests.integration.raw import connect, recv_exactly
from tests.scripted_broker import ScriptedBroker, answer_normally

pytestmark = [pytest.mark.integration, pytest.mark.skipif(not splice_supported(), reason="splice(2) is Linux-only")]

SPLICED = "kafka_quota_proxy_spliced_bytes_total"
PARTITIONS = 12
COUNT = 3000
PAYLOAD = 8 * 1024  # 3000 x 8 KiB = 24 MiB each way: produce requests and fetch responses far above SPLICE_MIN_BYTES


def value(seq: int) -> bytes:
    """Each message's value says which it is all through, so a byte out of place anywhere fails the comparison."""
    head = f"{seq:08d}:".encode()
    return (head * (PAYLOAD // len(head) + 1))[:PAYLOAD]


def ck_produce_large(bootstrap: str, topic: str, client_id: str = "rdkafka") -> None:
    ck_produce(
        bootstrap,
        topic,
        COUNT,
        records=((str(seq % 97).encode(), value(seq)) for seq in range(COUNT)),
        **{
            "client.id": client_id,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "max.in.flight.requests.per.connection": 5,
        },
    )


def ck_read_all(bootstrap: str, topic: str, client_id: str = "rdkafka") -> dict[int, list[bytes]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False, "client.id": client_id}
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        out: dict[int, list[bytes]] = defaultdict(list)
        got, deadline = 0, time.monotonic() + 60
        while got < COUNT and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if not msg.error():
                    out[msg.partition()].append(msg.value())
                    got += 1
        return out
    finally:
        consumer.close()


async def aio_read_all(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=4 * 1024 * 1024,
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        out: dict[int, list[bytes]] = defaultdict(list)
        got, deadline = 0, time.monotonic() + 60
        while got < COUNT and time.monotonic() < deadline:
            for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                out[tp.partition].extend(r.value for r in records)
                got += len(records)
        return out
    finally:
        await consumer.stop()


def assert_every_message(by_partition: dict[int, list[bytes]]) -> None:
    seen = sorted(int(v[:8]) for values in by_partition.values() for v in values)
    assert seen == list(range(COUNT)), f"{len(seen)} messages read back, {len(set(seen))} distinct, of {COUNT}"
    for values in by_partition.values():
        seqs = [int(v[:8]) for v in values]
        assert seqs == sorted(seqs), "out of order within a partition"
        for v in values:
            assert v == value(int(v[:8])), f"message {int(v[:8])} changed on the way"


@pytest.mark.parametrize("loop_kind", ["uvloop", "asyncio"])
def test_large_produces_and_fetches_are_spliced_and_arrive_intact(loop_kind: str) -> None:
    from tests.integration.clients import ck_create_topic

    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    with proxy_in_front(broker, proxy_config(proxy_port, broker_port), loop_kind) as proxy:
        topic = "spliced"
        ck_create_topic(proxy.bootstrap, topic, PARTITIONS)
        ck_produce_large(proxy.bootstrap, topic)
        assert_every_message(ck_read_all(proxy.bootstrap, topic))
        assert_every_message(asyncio.run(aio_read_all(proxy.bootstrap, topic)))
        request_bytes = proxy.metric("kafka_quota_proxy_request_bytes_total", listener="PLAINTEXT", api="Produce")
        response_bytes = proxy.metric("kafka_quota_proxy_response_bytes_total", listener="PLAINTEXT", api="Fetch")
        spliced_requests = proxy.metric(SPLICED, listener="PLAINTEXT", direction="request")
        spliced_responses = proxy.metric(SPLICED, listener="PLAINTEXT", direction="response")
    # Most of the produced and fetched bytes went through the kernel (each frame's first read is copied)
    assert spliced_requests > 0.5 * request_bytes, (spliced_requests, request_bytes)
    assert spliced_responses > 0.5 * response_bytes, (spliced_responses, response_bytes)


def test_quotas_charge_the_same_bytes_when_spliced() -> None:
    """Under a producer_byte_rate (too high to throttle) the spliced Produce requests are charged their frame size,
    read from the header as before; under a consumer_byte_rate the Fetch responses are buffered to be measured (and
    trimmed if need be), so they are copied, not spliced, and charged their size."""
    from tests.integration.clients import ck_create_topic

    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    quotas = [{"entity": {"client-id": "metered"}, "producer_byte_rate": 10**9, "consumer_byte_rate": 10**9}]
    with proxy_in_front(broker, proxy_config(proxy_port, broker_port, quotas=quotas)) as proxy:
        ck_create_topic(proxy.bootstrap, "metered", PARTITIONS)
        ck_produce_large(proxy.bootstrap, "metered", client_id="metered")
        assert_every_message(ck_read_all(proxy.bootstrap, "metered", client_id="metered"))

        def metric(name: str, **labels) -> float:
            return proxy.metric(f"kafka_quota_proxy_{name}", **labels)

        produces = metric("requests_total", listener="PLAINTEXT", api="Produce")
        produced = metric("request_bytes_total", listener="PLAINTEXT", api="Produce")
        fetched = metric("response_bytes_total", listener="PLAINTEXT", api="Fetch")
        charged_produce = metric("quota_bytes_total", quota="producer_byte_rate", user="", client_id="metered")
        charged_fetch = metric("quota_bytes_total", quota="consumer_byte_rate", user="", client_id="metered")
        spliced_requests = metric("spliced_bytes_total", listener="PLAINTEXT", direction="request")
        spliced_responses = metric("spliced_bytes_total", listener="PLAINTEXT", direction="response")
    assert spliced_requests > 0.5 * produced
    assert charged_produce == produced - 4 * produces  # each request's size, without its 4-byte size prefix
    assert spliced_responses == 0
    assert charged_fetch == pytest.approx(fetched, rel=0.01)  # the size of what went to the client


def test_splice_off_copies_everything() -> None:
    from tests.integration.clients import ck_create_topic

    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    config = proxy_config(proxy_port, broker_port, **{"connections.splice": "off"})
    with proxy_in_front(broker, config) as proxy:
        ck_create_topic(proxy.bootstrap, "copied", PARTITIONS)
        ck_produce_large(proxy.bootstrap, "copied")
        assert_every_message(ck_read_all(proxy.bootstrap, "copied"))
        assert proxy.metric(SPLICED, listener="PLAINTEXT", direction="request") == 0
        assert proxy.metric(SPLICED, listener="PLAINTEXT", direction="response") == 0


# -- the stream cut in the middle of a splice ----------------------------------------------------------------------

LIST_OFFSETS = 2  # an API the proxy does not decode: requests and responses stream through as opaque bytes
DECLARED = 4 * 1024 * 1024  # the cut frame's declared size
SENT = 1024 * 1024  # how much of it is sent before the cut


def proxy_fds(*ports: int) -> int:
    """The fds a client connection through the proxy can hold, of this process (the proxy runs in it): TCP sockets
    with an end on one of ``ports`` (the proxy's listener, the broker) but for the proxy's own Kafka clients'
    connections (their config follower reconnects on its own schedule), and pipes, less the empty pipes splices keep
    for reuse. Counted by kind, not all of /proc/self/fd: a full run once saw 32 > 31 from a socket that was not the
    connection's."""
    from proxy.cluster.own_clients import NOTED
    from proxy.connection import splice

    own = {local[1] for local, _ in NOTED}
    inodes = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote = int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16)
            if (local in ports or remote in ports) and local not in own:
                inodes.add(fields[9])
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("pipe:") or (target.startswith("socket:[") and target[8:-1] in inodes):
            count += 1
    return count - 2 * splice.pooled_pipes()


def taken_by_proxy(proxy, sock: socket.socket) -> bool:
    """Every byte ``sock`` sent has left the kernel's queues on the way into the proxy (the client's send queue, the
    receive queue of the socket the proxy accepted): the proxy read or spliced all of it. False while the proxy has
    not accepted the connection yet (the kernel completes it first; on a busy machine the accept comes later)."""
    try:
        accepted = tcp_socket(sock.getsockname()[:2], ("127.0.0.1", proxy.port))
    except LookupError:
        return False
    with accepted:
        return queued(sock, SIOCOUTQ) == 0 and queued(accepted, SIOCINQ) == 0


def closed(proxy, reason: str) -> float:
    return proxy.metric("kafka_quota_proxy_connections_closed_total", listener="PLAINTEXT", reason=reason)


@pytest.mark.parametrize("loop_kind", ["uvloop", "asyncio"])
@pytest.mark.parametrize("how", ["fin", "rst"])
def test_client_closing_in_the_middle_of_a_spliced_request(how: str, loop_kind: str) -> None:
    """A client sends 1 MiB of a request declared 4 MiB and closes (FIN: the half-close goes on to Tansu, which
    closes; RST: the proxy closes at once). Its connection ends, nothing it held stays open, and the proxy goes on
    serving: a produce and a read-back through it afterwards."""
    from tests.integration.clients import assert_exactly_once_in_order, ck_consume, ck_create_topic, ck_produce

    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    with proxy_in_front(broker, proxy_config(proxy_port, broker_port), loop_kind) as proxy:
        ck_create_topic(proxy.bootstrap, "after", 2)  # the clients' own connections come and go before the count
        before = proxy_fds(proxy_port, broker_port)
        sock = connect(proxy_port)
        head = encode_request_header(LIST_OFFSETS, 1, 9, "cut-client")
        sock.sendall(struct.pack(">i", len(head) + DECLARED - 4) + head + os.urandom(SENT))
        # then the proxy has taken all of it (more than SPLICE_MIN_BYTES past the first read: spliced, as the
        # spliced_bytes_total check below shows)
        wait_until(lambda: taken_by_proxy(proxy, sock), 15, "the proxy taking the request's first MiB")
        if how == "rst":
            reset(sock)
        else:
            sock.shutdown(socket.SHUT_WR)
        wait_until(lambda: closed(proxy, "client_closed") >= 1, 15, "the proxy closed the connection")
        if how == "fin":
            sock.settimeout(10)
            assert sock.recv(1) == b""  # no answer to a request that never came whole: the end of the stream
            sock.close()
        spliced = proxy.metric(SPLICED, listener="PLAINTEXT", direction="request")
        assert 0 < spliced <= SENT
        wait_until(
            lambda: proxy_fds(proxy_port, broker_port) <= before,
            15,
            f"the connection's fds are closed ({proxy_fds(proxy_port, broker_port)} > {before})",
        )
        ck_produce(proxy.bootstrap, "after", 200)
        assert_exactly_once_in_order(ck_consume(proxy.bootstrap, "after", 200), 200)


def cut_response(how: str):
    """The scripted broker's answer to ListOffsets: a response declared 4 MiB, 1 MiB of it, then the end (FIN) or
    a reset. Everything else is answered normally."""
    sent = {}

    def answer(sock: socket.socket, header, request: bytes) -> None:
        if header.api_key != LIST_OFFSETS:
            answer_normally(sock, header, request)
            return
        head = encode_response_header(LIST_OFFSETS, header.api_version, header.correlation_id)
        data = struct.pack(">i", len(head) + DECLARED - 4) + head + os.urandom(SENT)
        sent["bytes"] = data
        sock.sendall(data)
        sent["done"] = True
        wait_until(lambda: sent.get("cut"), 30, "the test sees the proxy splicing it", interval=0.01)
        if how == "rst":
            reset(sock)
        else:
            sock.shutdown(socket.SHUT_WR)

    return answer, sent


@pytest.mark.parametrize("loop_kind", ["uvloop", "asyncio"])
@pytest.mark.parametrize("how", ["fin", "rst"])
def test_broker_closing_in_the_middle_of_a_spliced_response(how: str, loop_kind: str) -> None:
    """Scripted broker (Tansu cannot be made to stop half-way through a response): it sends 1 MiB of a response
    declared 4 MiB, then closes. The client gets exactly the bytes the broker sent, in order, then the end of its
    connection (the broker's is lost: upstream_closed), and nothing the connection held stays open."""
    answer, sent = cut_response(how)
    broker = ScriptedBroker(answer).start()
    config = proxy_config(0, broker.port)
    config["dynamic_config"] = {"enabled": False}  # the scripted broker must see only the test's requests
    with proxy_in_front(broker, config, loop_kind) as proxy:
        before = proxy_fds(proxy.port, broker.port)
        sock = connect(proxy.port)
        sock.sendall(frame(encode_request_header(LIST_OFFSETS, 1, 5, "cut-broker") + b"\x00" * 16))
        wait_until(lambda: sent.get("done"), 15, "the broker sending the response's first MiB")
        received = bytearray(recv_exactly(sock, len(sent["bytes"])))  # all of it, before the broker cuts
        sent["cut"] = True  # the splice now waits for the rest, and meets the broker's end
        sock.settimeout(10)
        try:
            while chunk := sock.recv(1 << 20):
                received += chunk
        except ConnectionResetError:
            pass
        assert bytes(received) == sent["bytes"], f"{len(received)} bytes received of {len(sent['bytes'])} sent"
        wait_until(lambda: closed(proxy, "upstream_closed") >= 1, 15, "the proxy closed the connection")
        sock.close()
        assert 0 < proxy.metric(SPLICED, listener="PLAINTEXT", direction="response") < SENT
        wait_until(
            lambda: proxy_fds(proxy.port, broker.port) <= before,
            15,
            f"the connection's fds are closed ({proxy_fds(proxy.port, broker.port)} > {before})",
        )


def test_shutdown_lets_a_response_being_spliced_finish() -> None:
    """Scripted broker (it must hold a response half-way while the proxy starts draining): SIGTERM's drain closes a
    connection only between responses. The client gets all 4 MiB, then the end of its connection; before, the
    response's request had left the in-flight queue at its header, so the connection counted as drained and was
    closed in the middle of it."""
    release = threading.Event()
    whole = {}

    def answer(sock: socket.socket, header, request: bytes) -> None:
        if header.api_key != LIST_OFFSETS:
            answer_normally(sock, header, request)
            return
        head = encode_response_header(LIST_OFFSETS, header.api_version, header.correlation_id)
        body = head + os.urandom(DECLARED - 4 - len(head))
        data = whole["bytes"] = struct.pack(">i", len(body)) + body
        sock.sendall(data[:SENT])
        release.wait(20)
        sock.sendall(data[SENT:])

    broker = ScriptedBroker(answer).start()
    config = proxy_config(0, broker.port)
    config["dynamic_config"] = {"enabled": False}
    try:
        proxy = start_proxy(config)
    except BaseException:
        broker.stop()
        raise
    stopping = threading.Thread(target=proxy.stop, kwargs={"grace_ms": 10_000})
    try:
        sock = connect(proxy.port)
        sock.sendall(frame(encode_request_header(LIST_OFFSETS, 1, 5, "drained") + b"\x00" * 16))
        wait_until(lambda: queued(sock, SIOCINQ) > 0, 15, "the response's first bytes at the client")
        stopping.start()
        wait_until(lambda: draining(proxy), 15, "the connection draining")
        release.set()
        received = recv_exactly(sock, DECLARED)
        assert received == whole["bytes"]
        sock.settimeout(10)
        assert sock.recv(1) == b""  # then the end: drained
        sock.close()
    finally:
        release.set()
        stopping.join(20)
        broker.stop()


def draining(proxy) -> bool:
    """Every open connection is draining (its mute state names it, on /metrics), and one is open."""
    scraped = proxy.scraped("kafka_quota_proxy_connections_mute_state")
    states = {dict(labels)["state"] for labels, n in scraped.items() if n}
    return bool(states) and all("DRAINING" in state for state in states)
