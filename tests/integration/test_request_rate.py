"""Request-rate quotas through a sidecar proxy on Tansu, as a hostile tenant would try to escape them: one raw
connection sends Metadata requests under a different client id each time, and they are counted against the one
``{user: "<default>"}`` quota and throttled by it. (A consumer group rebalancing in a loop is
tests/integration/kafka/test_request_rate_groups.py: it needs Apache Kafka's group coordinator.)
"""

from __future__ import annotations

import pytest

from proxy.codec.apis import METADATA
from proxy.codec.header import encode_request_header, frame, response_header_length
from proxy.codec.messages import decode_response, encode_request, new_request
from tests.integration.raw import connect, read_frame
from tests.integration.upstreams import TansuUpstream

pytestmark = [pytest.mark.integration]

SETTINGS = {"quota.window.num": 3, "quota.request.rate.apis": "Metadata"}


def rate_metric(proxy, name: str, user: str = "", client_id: str = "", group: str = "") -> float:
    return proxy.metric(f"kafka_quota_proxy_request_rate_{name}", user=user, client_id=client_id, group=group)


def test_rotating_client_ids_on_one_connection_share_the_users_quota():
    """One raw connection sends Metadata under a new client id each time: every request counts against the user's
    one quota (its tags carry no client id), so the ids gain nothing: the answers carry its throttle, and the
    connection is muted for it whichever id comes next."""
    quotas = [{"entity": {"user": "<default>"}, "request_rate": 5}]
    with TansuUpstream().sidecar(quotas, **SETTINGS) as proxy:
        sock = connect(proxy.port)
        throttled = 0
        try:
            for i in range(16):
                body = encode_request(METADATA, 9, new_request(METADATA, 9, topics=[]))
                sock.sendall(frame(encode_request_header(METADATA, 9, i, f"rotated-{i}") + body))
                whole = frame(read_frame(sock))  # with its size, as response_header_length reads it
                answer = decode_response(METADATA, 9, whole[response_header_length(METADATA, 9, whole) :])
                throttled += answer.throttle_time_ms > 0
        finally:
            sock.close()
        counted = rate_metric(proxy, "requests_total", user="ANONYMOUS")
        assert counted == 16 and rate_metric(proxy, "throttled_requests_total", user="ANONYMOUS") == throttled > 0
