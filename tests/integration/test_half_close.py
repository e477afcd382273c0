"""A throttled client that writes many requests at once and then half-closes, against Tansu.

The proxy stops reading a throttled client at the next request boundary and holds back what it had already read
past it, and reads no more (so it sees the end of the stream only after replaying them). When that client
half-closes (shutdown(SHUT_WR) right after its last write, as a producer closing after flush does), every
request held back must still reach the broker before the half-close is passed on, and be answered in order.
"""

import socket
import struct

import pytest
from kafka.record.memory_records import MemoryRecordsBuilder

from proxy.codec.header import encode_request_header, frame
from proxy.codec.messages import encode_request, new_request
from tests.harness import Tansu, free_port, proxy_config, start_proxy
from tests.integration import clients as c
from tests.integration.raw import read_frame

pytestmark = pytest.mark.integration

QUOTA = 20_000  # bytes/s: a few requests are throttled, with mutes of a few hundred ms


def produce_frame(correlation_id: int, topic: str, value_size: int) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    builder.append(timestamp=None, key=None, value=b"v" * value_size)
    builder.close()
    request = new_request(
        0,
        7,
        acks=1,
        timeout_ms=30000,
        topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": bytes(builder.buffer())}]}],
    )
    return frame(encode_request_header(0, 7, correlation_id, "half-close") + encode_request(0, 7, request))


@pytest.fixture
def proxy():
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    quotas = [{"entity": {"client-id": "half-close"}, "producer_byte_rate": QUOTA}]
    running = start_proxy(
        proxy_config(proxy_port, broker_port, quotas=quotas, **{"quota.window.num": 3, "quota.mute.max.ms": 2000})
    )
    yield running
    running.stop()
    broker.stop()


def test_requests_held_back_are_forwarded_before_the_half_close(proxy):
    c.kp_create_topic(proxy.bootstrap, "half-close", 1)
    count = 12
    stream = b"".join(produce_frame(i, "half-close", 8_000) for i in range(count))
    host, port = proxy.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(stream)  # one write: the proxy reads past the first throttled request's boundary
        sock.shutdown(socket.SHUT_WR)
        answered = []
        for _ in range(count):
            response = read_frame(sock)
            answered.append(struct.unpack_from(">i", response, 0)[0])
    assert answered == list(range(count)), "a request held back when the client half-closed was lost"
    throttled = proxy.metric(
        "kafka_quota_proxy_quota_throttled_responses_total", quota="producer_byte_rate", user="", client_id="half-close"
    )
    assert throttled >= 2, "the scenario did not throttle: nothing was held back"
