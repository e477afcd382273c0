"""What happens when things go wrong: bad frames, a broker that goes away, a slow broker, shutdown."""

import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from proxy.codec.header import encode_request_header, frame
from tests.harness import Tansu, free_port, proxy_config, start_proxy, wait_for_port, wait_until
from tests.integration import clients as c
from tests.integration.os_sockets import SIOCINQ, SIOCOUTQ, queued, tcp_socket, tcp_sockets
from tests.integration.raw import read_frame

pytestmark = pytest.mark.integration


def api_versions_request(corr: int) -> bytes:
    return frame(encode_request_header(18, 0, corr, "raw"))


def closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
        return True
    except (ConnectionError, OSError) as exc:
        return not isinstance(exc, socket.timeout)


def http_status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def readyz_body(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
            return r.read().decode()
    except urllib.error.HTTPError as e:
        return e.read().decode()


def ready_within(proxy, seconds: float) -> bool:
    """Whether /readyz answers 200 within ``seconds`` (not before the config topic has been read once)."""
    try:
        wait_until(lambda: http_status(proxy.metrics_port, "/readyz") == 200, seconds, "/readyz 200")
    except AssertionError:
        return False
    return True


@pytest.fixture
def small_frames():
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    proxy = start_proxy(proxy_config(proxy_port, broker_port, **{"socket.request.max.bytes": 4096}))
    yield proxy
    proxy.stop()
    broker.stop()


@pytest.mark.parametrize("size", [4097, 2**31 - 1, -1, -(2**31)])
def test_oversized_or_negative_frame_closes_only_that_connection(small_frames, size):
    proxy = small_frames
    good = socket.create_connection(("127.0.0.1", proxy.port))
    bad = socket.create_connection(("127.0.0.1", proxy.port))
    good.sendall(api_versions_request(1))
    assert struct.unpack(">i", read_frame(good)[:4])[0] == 1
    bad.sendall(struct.pack(">i", size) + b"\x00" * 16)
    assert closed_within(bad, 5)
    good.sendall(api_versions_request(2))
    assert struct.unpack(">i", read_frame(good)[:4])[0] == 2
    assert proxy.metric("kafka_quota_proxy_frame_errors_total", listener="PLAINTEXT", direction="request") == 1
    assert proxy.metric("kafka_quota_proxy_connections_closed_total", listener="PLAINTEXT", reason="frame_error") == 1
    good.close()


def test_frame_just_under_the_limit_is_forwarded(small_frames):
    c.kp_create_topic(small_frames.bootstrap, "small", 1)
    c.kp_produce(small_frames.bootstrap, "small", 50, batch_size=1000, linger_ms=0)
    assert small_frames.metric("kafka_quota_proxy_frame_errors_total", listener="PLAINTEXT", direction="request") == 0


def test_broker_down_and_back():
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    proxy = start_proxy(proxy_config(proxy_port, broker_port, **{"upstream.connect.timeout.ms": 1000}))
    try:
        assert ready_within(proxy, 10)  # once the config topic has been read
        open_conn = socket.create_connection(("127.0.0.1", proxy.port))
        open_conn.sendall(api_versions_request(1))
        read_frame(open_conn)

        broker.stop()
        assert closed_within(open_conn, 5), "client connection not closed when the broker went away"
        fresh = socket.create_connection(("127.0.0.1", proxy.port))
        assert closed_within(fresh, 5), "new client connection not closed while the broker is down"
        wait_until(lambda: http_status(proxy.metrics_port, "/readyz") == 503, 10, "/readyz 503")
        assert proxy.metric("kafka_quota_proxy_ready") == 0  # the gauge says what /readyz says
        assert readyz_body(proxy.metrics_port) == "not ready: broker unreachable\n"
        assert http_status(proxy.metrics_port, "/healthz") == 200
        assert proxy.metric("kafka_quota_proxy_upstream_errors_total", listener="PLAINTEXT", kind="connect") >= 1

        broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
        wait_until(lambda: http_status(proxy.metrics_port, "/readyz") == 200, 10, "/readyz 200")
        assert proxy.metric("kafka_quota_proxy_ready") == 1
        c.kp_create_topic(proxy.bootstrap, "back", 1)
        c.kp_produce(proxy.bootstrap, "back", 100)
        assert sum(len(v) for v in c.kp_consume(proxy.bootstrap, "back", 100).values()) == 100
    finally:
        proxy.stop()
        broker.stop()


def test_slow_broker_stops_reading_from_client():
    """Back-pressure, against a scripted broker that accepts and never reads (Tansu cannot be made slow).

    The client keeps sending 1 MiB requests; the proxy must stop reading from it instead of buffering."""
    sink = socket.create_server(("127.0.0.1", 0))
    accepted = []  # every connection to the broker (the readiness probe's too): none is read

    def accept() -> None:
        try:
            while True:
                accepted.append(sink.accept()[0])
        except OSError:  # the sink closed
            pass

    threading.Thread(target=accept, daemon=True).start()
    proxy = start_proxy(proxy_config(0, sink.getsockname()[1]))
    try:
        client = socket.create_connection(("127.0.0.1", proxy.port))
        client.setblocking(False)
        request = frame(encode_request_header(3, 1, 1, "flood") + b"\x00" * (1 << 20))
        sent, stalled_at = 0, None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                offset = sent % len(request)  # a partial send continues the same frame: the stream stays framed
                sent += client.send(request[offset:])
                stalled_at = None
            except BlockingIOError:
                stalled_at = stalled_at or time.monotonic()
                if time.monotonic() - stalled_at > 1.0:
                    break
                time.sleep(0.01)  # deliberate: blocked for a whole second means the proxy stopped reading
        assert stalled_at is not None, "client never blocked: the proxy kept reading"
        # every byte sent is in a kernel queue on the way (read through the OS: the client's send queue, the
        # proxy's two sockets, the broker's receive queue) or held by the proxy: what the kernel does not hold
        # (the proxy's other connections to the broker, its readiness probe's, carry a few bytes: counted too)
        to_proxy = tcp_socket(client.getsockname()[:2], ("127.0.0.1", proxy.port))
        to_broker = tcp_sockets(sink.getsockname()[:2])
        try:
            at_broker = sum(queued(sock, SIOCINQ) for sock in list(accepted))
            in_kernel = (
                queued(client, SIOCOUTQ)
                + queued(to_proxy, SIOCINQ)
                + sum(queued(sock, SIOCOUTQ) for sock in to_broker)
                + at_broker
            )
        finally:
            for sock in [to_proxy, *to_broker]:
                sock.close()
        assert at_broker > 0, "the request never reached the broker: the proxy did not forward it"
        buffered = sent - in_kernel
        assert buffered <= 4 << 20, f"proxy buffered {buffered} bytes for a broker that does not read"
        assert sent < 400 << 20
        client.close()
    finally:
        proxy.stop(grace_ms=100)
        sink.close()
        for sock in accepted:
            sock.close()


def test_sigterm_lets_in_flight_requests_finish_and_exits_0(tmp_path):
    """A Fetch that the broker holds for max_wait_ms is answered after SIGTERM, then the process exits 0."""
    proxy_port, broker_port, metrics_port = free_port(), free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    cfg = tmp_path / "proxy.yaml"
    cfg.write_text(
        f"upstream: {{bootstrap_servers: ['127.0.0.1:{broker_port}']}}\n"
        f"listeners: [{{name: PLAINTEXT, bind: '127.0.0.1:{proxy_port}'}}]\n"
        f"metrics: {{bind: '127.0.0.1:{metrics_port}'}}\n"
        "settings: {shutdown.grace.period.ms: 5000}\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "run", "--config", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_port(proxy_port)
        c.kp_create_topic(f"127.0.0.1:{proxy_port}", "quiet", 1)
        sock = socket.create_connection(("127.0.0.1", proxy_port))
        # Fetch v4: replica_id, max_wait_ms=1500, min_bytes=1, max_bytes, isolation, [topic [partition offset max]]
        body = struct.pack(">iiiib", -1, 1500, 1, 1 << 20, 0) + struct.pack(">ih", 1, 5) + b"quiet"
        body += struct.pack(">iiqi", 1, 0, 0, 1 << 20)
        sock.sendall(frame(encode_request_header(1, 4, 77, "fetcher") + body))
        sent_at = time.monotonic()
        time.sleep(0.3)  # deliberate: the fetch reaches the broker (which holds it 1.5 s) before the signal
        proc.send_signal(15)
        sock.settimeout(10)
        response = read_frame(sock)
        assert struct.unpack(">i", response[:4])[0] == 77
        assert time.monotonic() - sent_at >= 1.0, "the broker did not hold the fetch: nothing was in flight"
        assert proc.wait(15) == 0
        assert closed_within(sock, 5)
    finally:
        if proc.poll() is None:
            proc.kill()
        broker.stop()


def test_broker_that_never_answers_is_bounded():
    """A scripted broker that accepts and reads but never answers (Tansu always answers): the waiting client's
    connection is closed after upstream.response.timeout.ms."""
    silent = socket.create_server(("127.0.0.1", 0))
    held = []

    def accept_forever():
        while True:
            try:
                held.append(silent.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept_forever, daemon=True).start()
    proxy = start_proxy(proxy_config(0, silent.getsockname()[1], **{"upstream.response.timeout.ms": 1000}))
    try:
        client = socket.create_connection(("127.0.0.1", proxy.port))
        client.sendall(api_versions_request(1))
        assert closed_within(client, 5)
        assert (
            proxy.metric("kafka_quota_proxy_connections_closed_total", listener="PLAINTEXT", reason="upstream_timeout")
            == 1
        )
        assert proxy.metric("kafka_quota_proxy_upstream_errors_total", listener="PLAINTEXT", kind="timeout") == 1
    finally:
        proxy.stop(grace_ms=100)
        silent.close()


def test_idle_and_half_sent_connections_are_closed():
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    proxy = start_proxy(proxy_config(proxy_port, broker_port, **{"connections.max.idle.ms": 1000}))
    try:
        idle = socket.create_connection(("127.0.0.1", proxy.port))
        half = socket.create_connection(("127.0.0.1", proxy.port))
        half.sendall(api_versions_request(1)[:7])  # a frame that never completes
        busy = socket.create_connection(("127.0.0.1", proxy.port))
        for corr in range(10):  # 3 s of a request every 0.3 s: in use, never idle for 1 s
            busy.sendall(api_versions_request(corr))
            assert struct.unpack(">i", read_frame(busy)[:4])[0] == corr
            time.sleep(0.3)  # deliberate: the pace that keeps this connection in use, never idle for 1 s
        assert closed_within(idle, 5) and closed_within(half, 5)
        assert proxy.metric("kafka_quota_proxy_connections_closed_total", listener="PLAINTEXT", reason="idle") == 2
        busy.close()
    finally:
        proxy.stop()
        broker.stop()


def test_malformed_body_of_a_decoded_request_closes_only_that_connection():
    """A Fetch from a client under a consumer quota is decoded (to cap max_bytes); garbage there is a protocol
    error for that connection alone."""
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    quotas = [{"entity": {"client-id": "bad-fetcher"}, "consumer_byte_rate": 1000}]
    proxy = start_proxy(proxy_config(proxy_port, broker_port, quotas=quotas))
    try:
        good = socket.create_connection(("127.0.0.1", proxy.port))
        bad = socket.create_connection(("127.0.0.1", proxy.port))
        bad.sendall(frame(encode_request_header(1, 12, 5, "bad-fetcher") + b"\xff" * 40))
        assert closed_within(bad, 5)
        good.sendall(api_versions_request(3))
        assert struct.unpack(">i", read_frame(good)[:4])[0] == 3
        assert proxy.metric("kafka_quota_proxy_frame_errors_total", listener="PLAINTEXT", direction="request") == 1
        good.close()
    finally:
        proxy.stop()
        broker.stop()


def test_half_close_still_gets_the_answers(sidecar):
    """A client that sends its requests and then shuts down its sending side still gets every answer: the
    proxy passes the half-close on instead of dropping the broker connection."""
    sock = socket.create_connection(("127.0.0.1", sidecar.proxy.port))
    sock.sendall(b"".join(api_versions_request(corr) for corr in range(20)))
    sock.shutdown(socket.SHUT_WR)
    sock.settimeout(10)
    got = [struct.unpack(">i", read_frame(sock)[:4])[0] for _ in range(20)]
    assert got == list(range(20))
    assert closed_within(sock, 5), "the connection should close once the broker has closed its side"


def test_readyz_says_not_ready_while_the_proxy_drains_at_shutdown():
    """A client halfway through a request keeps the proxy draining for its grace period; meanwhile /readyz is 503."""
    broker_port, proxy_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    proxy = start_proxy(proxy_config(proxy_port, broker_port))
    try:
        assert ready_within(proxy, 10)  # once the config topic has been read
        client = socket.create_connection(("127.0.0.1", proxy_port))
        client.sendall(api_versions_request(1)[:6])  # the middle of a frame: not drained until the grace ends
        time.sleep(0.2)  # deliberate: the half frame reaches the proxy before it is told to stop
        stopping = threading.Thread(target=proxy.stop, kwargs={"grace_ms": 3000})
        stopping.start()
        wait_until(lambda: http_status(proxy.metrics_port, "/readyz") == 503, 2, "/readyz 503 while shutting down")
        assert readyz_body(proxy.metrics_port) == "not ready: shutting down\n"
        stopping.join(10)
        client.close()
    finally:
        broker.stop()


def test_a_broker_that_accepts_connections_but_never_answers_is_not_ready():
    """A scripted broker (a stand-in for a SIGSTOPped one: Tansu cannot be paused portably in a test) that accepts
    TCP and reads requests but never answers: /readyz must say 503, where a TCP connect alone would say 200."""
    from tests.scripted_broker import ScriptedBroker

    silent = ScriptedBroker(answer=lambda sock, header, request: None).start()
    proxy = start_proxy(proxy_config(free_port(), silent.port, **{"upstream.connect.timeout.ms": 500}))
    try:
        assert http_status(proxy.metrics_port, "/readyz") == 503
    finally:
        proxy.stop()
        silent.stop()


def test_a_request_in_a_version_no_broker_speaks_is_the_clients_error():
    """Metadata v99: the proxy cannot decode its answer and no broker speaks it. The connection closes as a request
    frame error, never counted against the broker; other clients are unaffected."""
    broker_port, proxy_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    proxy = start_proxy(proxy_config(proxy_port, broker_port))
    try:
        bad = socket.create_connection(("127.0.0.1", proxy_port))
        bad.sendall(frame(encode_request_header(3, 99, 7, "odd") + b"\x00\x00\x00\x00"))
        assert closed_within(bad, 5)
        assert proxy.metric("kafka_quota_proxy_frame_errors_total", listener="PLAINTEXT", direction="request") == 1
        assert proxy.metric("kafka_quota_proxy_frame_errors_total", listener="PLAINTEXT", direction="response") == 0
        good = socket.create_connection(("127.0.0.1", proxy_port))
        good.sendall(api_versions_request(3))
        assert struct.unpack(">i", read_frame(good)[:4])[0] == 3
        good.close()
    finally:
        proxy.stop()
        broker.stop()


def test_running_out_of_file_descriptors_is_not_blamed_on_the_broker():
    """EMFILE from the proxy's own socket() (simulated on the standard asyncio loop: a real fd limit would starve
    the test's own sockets too): the client is closed, fd_exhausted counts it, the broker stays ready. Ready is
    awaited first: /readyz is 503 until the config topic has been read once, which needs sockets too."""
    import errno

    broker_port, proxy_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    proxy = start_proxy(proxy_config(proxy_port, broker_port), loop_kind="asyncio")
    try:
        assert ready_within(proxy, 20)

        async def out_of_fds(*args, **kwargs):
            raise OSError(errno.EMFILE, "Too many open files")

        proxy.loop.create_connection = out_of_fds
        client = socket.create_connection(("127.0.0.1", proxy_port))
        assert closed_within(client, 5)
        assert proxy.metric("kafka_quota_proxy_fd_exhausted_total", listener="PLAINTEXT") == 1
        assert proxy.metric("kafka_quota_proxy_upstream_errors_total", listener="PLAINTEXT", kind="connect") == 0
        assert (
            proxy.metric("kafka_quota_proxy_connections_closed_total", listener="PLAINTEXT", reason="fd_exhausted") == 1
        )
        assert http_status(proxy.metrics_port, "/readyz") == 200
    finally:
        proxy.stop()
        broker.stop()


def test_operations_endpoint_answers_an_oversized_header_with_431():
    broker_port, proxy_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    proxy = start_proxy(proxy_config(proxy_port, broker_port))
    try:
        sock = socket.create_connection(("127.0.0.1", proxy.metrics_port))
        sock.sendall(b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
        reply = sock.recv(200)
        assert reply.startswith(b"HTTP/1.1 431"), reply
        sock.close()
        assert http_status(proxy.metrics_port, "/healthz") == 200
    finally:
        proxy.stop()
        broker.stop()
