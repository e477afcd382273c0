"""A Metadata response's head (proxy.codec.metadata_prefix) and its rewrite in cluster mode (proxy.apis.metadata):
the brokers become the proxy's ports, the topics stay the broker's own bytes, every version. Pure."""

from __future__ import annotations

import uuid

import pytest

from proxy.apis.metadata import rewrite_head
from proxy.cluster.broker_ports import BrokerPorts
from proxy.codec.apis import METADATA
from proxy.codec.errors import ProtocolError
from proxy.codec.messages import decode_response, encode_response, new_response
from proxy.codec.metadata_prefix import decode_head, encode_head, topics_offset

VERSIONS = range(0, 14)


def answer(version: int, topics: int = 3) -> bytes:
    msg = new_response(
        METADATA,
        version,
        controller_id=1,
        cluster_id="c" if version >= 2 else None,
        brokers=[
            {"node_id": 1, "host": "kafka-1.internal", "port": 9092, "rack": "a"},
            {"node_id": 2, "host": "kafka-2.internal", "port": 9093},
        ],
        topics=[
            {"name": f"t{i}", "topic_id": uuid.uuid4(), "partitions": [{"partition_index": 0, "leader_id": 1}]}
            for i in range(topics)
        ],
    )
    return encode_response(METADATA, version, msg)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_head_is_found_decoded_and_written_back_byte_for_byte(version):
    body = answer(version)
    end = topics_offset(version, memoryview(body))
    head = decode_head(version, body[:end])
    assert [(b.node_id, b.host, b.port) for b in head.brokers] == [
        (1, "kafka-1.internal", 9092),
        (2, "kafka-2.internal", 9093),
    ]
    assert encode_head(version, head) == body[:end]
    assert decode_response(METADATA, version, body).topics[0].name == "t0"  # what follows is the topics


@pytest.mark.parametrize("version", VERSIONS)
def test_a_head_cut_short_is_a_protocol_error(version):
    body = answer(version, topics=0)
    end = topics_offset(version, memoryview(body))
    with pytest.raises(ProtocolError):
        topics_offset(version, memoryview(body[: end - 1]))


@pytest.mark.parametrize("version", VERSIONS)
def test_cluster_mode_rewrites_the_brokers_and_passes_the_topics_as_the_broker_wrote_them(version):
    opened = []
    cluster = BrokerPorts("L", "proxy.example", 30000, lambda node_id: opened.append(node_id) or True)
    body = answer(version, topics=50)
    end = topics_offset(version, memoryview(body))
    rewritten = rewrite_head(cluster, version, memoryview(body))
    msg = decode_response(METADATA, version, rewritten)
    assert [(b.node_id, b.host, b.port) for b in msg.brokers] == [
        (1, "proxy.example", 30001),
        (2, "proxy.example", 30002),
    ]
    assert rewritten.endswith(body[end:]) and opened == [1, 2]
    again = rewrite_head(cluster, version, memoryview(body))  # the same head, the same brokers: from the cache
    assert again == rewritten and cluster.metadata_heads[version][0] == body[:end]
    moved = body.replace(b"kafka-2.internal", b"kafka-9.internal")  # a broker moved: rewritten anew, learnt
    assert rewrite_head(cluster, version, memoryview(moved)) == rewritten
    assert cluster.brokers[2].host == "kafka-9.internal"


def test_a_head_naming_a_broker_whose_port_could_not_open_is_not_cached():
    """A port that could not be opened leaves its broker unknown, and the next answer naming it tries again: a
    cached head would never try."""
    tries = []
    cluster = BrokerPorts("L", "proxy.example", 30000, lambda node_id: tries.append(node_id) or node_id != 2)
    body = answer(12)
    for _ in range(2):
        rewrite_head(cluster, 12, memoryview(body))
    assert tries == [1, 2, 2] and 12 not in cluster.metadata_heads
