"""ApiVersions through the proxy: the intersection for decoded APIs, and the proxy's own error-35 answer."""

import struct

import pytest

from proxy.apis.api_versions import SERVED_BY_PROXY
from proxy.codec.apis import API_VERSIONS, DELETE_TOPICS, METADATA
from proxy.codec.header import encode_request_header, frame
from proxy.codec.messages import DECODED_APIS, decode_api_versions_response
from tests.integration import raw

pytestmark = pytest.mark.integration


def broker_api_versions(port: int, version: int = 3) -> dict[int, tuple[int, int]]:
    sock = raw.connect(port)
    try:
        msg = raw.exchange(sock, API_VERSIONS, version, client_software_name="t", client_software_version="1")
    finally:
        sock.close()
    assert msg.error_code == 0
    return {a.api_key: (a.min_version, a.max_version) for a in msg.api_keys}


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_decoded_apis_are_offered_only_in_versions_the_proxy_decodes(sidecar, version):
    direct = broker_api_versions(sidecar.broker.port, version)
    proxied = broker_api_versions(sidecar.proxy.port, version)
    assert set(proxied) - set(SERVED_BY_PROXY) <= set(direct)
    for key, (low, high) in proxied.items():
        if key in SERVED_BY_PROXY:  # the client-quota APIs: the proxy's own (dynamic config is on by default)
            assert (low, high) == SERVED_BY_PROXY[key]
        elif key in DECODED_APIS:
            ours = DECODED_APIS[key]
            assert (low, high) == (max(direct[key][0], ours[0]), min(direct[key][1], ours[1]))
        else:
            assert (low, high) == direct[key], "an API the proxy does not decode must pass through unchanged"


def test_too_new_api_versions_gets_v0_unsupported_version(sidecar):
    sock = raw.connect(sidecar.proxy.port)
    try:
        too_new = DECODED_APIS[API_VERSIONS][1] + 1
        # pipelined behind a Metadata request: the proxy's own answer must still come back second
        meta_body = struct.pack(">i", 0)
        sock.sendall(
            frame(encode_request_header(METADATA, 1, 10, "c") + meta_body)
            + frame(encode_request_header(API_VERSIONS, too_new, 11, "c") + b"\x00\x00\x00")
        )
        first = raw.read_frame(sock)
        second = raw.read_frame(sock)
    finally:
        sock.close()
    assert struct.unpack_from(">i", first, 0)[0] == 10
    assert struct.unpack_from(">i", second, 0)[0] == 11
    msg = decode_api_versions_response(too_new, second[4:])  # header v0: correlation id only
    assert msg.error_code == 35
    assert [(a.api_key, a.min_version, a.max_version) for a in msg.api_keys] == [
        (API_VERSIONS, *DECODED_APIS[API_VERSIONS])
    ]


def test_a_topic_named_by_its_id_alone_is_looked_up_once_and_charged():
    """A client's Metadata answer passes undecoded (issue 44, T7: decoding every answer to learn every topic took a
    core under a Metadata storm): a DeleteTopics v6 naming a topic by its id alone, which the proxy has not seen, is
    decided on one Metadata lookup of the proxy's own (the broker, behind a relay that counts its requests, sees one
    more Metadata than the client's), and charged its 3 partitions under the controller mutation quota."""
    from tests.harness import Tansu, free_port, proxy_config, start_proxy
    from tests.integration import clients as c
    from tests.relay import BrokerSideRecorder

    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    recorder = BrokerSideRecorder(("127.0.0.1", broker_port)).start()
    config = proxy_config(
        proxy_port, recorder.port, quotas=[{"entity": {"client-id": "<default>"}, "controller_mutation_rate": 1000}]
    )
    config["dynamic_config"] = {"enabled": False}  # no follower of the proxy's own asking for metadata
    try:
        proxy = start_proxy(config)
        try:
            c.kp_create_topic(proxy.bootstrap, "ids", 3)
            sock = raw.connect(proxy.port)
            try:
                meta = raw.exchange(
                    sock,
                    METADATA,
                    12,
                    topics=[{"name": "ids"}],
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
                topic_id = meta.topics[0].topic_id
                charged = mutations(proxy)
                looked_up = recorder.requests.get(METADATA, 0)
                deleted = raw.exchange(
                    sock,
                    DELETE_TOPICS,
                    6,
                    correlation_id=2,
                    timeout_ms=5000,
                    topics=[{"name": None, "topic_id": topic_id}],
                )
            finally:
                sock.close()
            assert [(r.topic_id, r.error_code) for r in deleted.responses] == [(topic_id, 0)]
            assert recorder.requests.get(METADATA, 0) == looked_up + 1  # the proxy's own lookup of the id
            assert mutations(proxy) - charged == 3
        finally:
            proxy.stop()
    finally:
        recorder.stop()
        broker.stop()


def mutations(proxy) -> float:
    """Partition mutations counted against every entity, from /metrics."""
    return sum(proxy.scraped("kafka_quota_proxy_controller_mutations_total").values())
