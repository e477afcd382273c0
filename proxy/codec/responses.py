"""Responses the proxy builds itself: the answer a broker would give to fail a request, in the request's version.

:func:`error_response` knows where each decoded API carries its errors, as Kafka's ``getErrorResponse`` does:

- per partition: Produce, Fetch (Fetch also has a top-level ``error_code`` from v7);
- per partition: DeleteRecords, OffsetCommit, TxnOffsetCommit, AddPartitionsToTxn (v4+ per transaction too, plus a
  top-level ``error_code``), WriteTxnMarkers (per producer id, then per partition);
- per topic: Metadata (plus the top-level ``error_code`` of v13), CreateTopics, DeleteTopics, CreatePartitions;
- per resource: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs (named ``(resource_type, resource_name)``);
- per entry: FindCoordinator v4+ (per coordinator key), AlterClientQuotas (per entity);
- top level: FindCoordinator v0-3, OffsetDelete, JoinGroup, SyncGroup, SaslHandshake, ApiVersions, InitProducerId,
  SaslAuthenticate, DescribeClientQuotas, DescribeCluster, ConsumerGroupHeartbeat, ShareGroupHeartbeat,
  StreamsGroupHeartbeat, ShareFetch and ShareAcknowledge (no partition, as Kafka's ``getErrorResponse``),
  AlterShareGroupOffsets and DeleteShareGroupOffsets (no topic).

``error_code`` is the request's code: it goes in the top-level field where the version has one and in every item
that ``item_errors`` does not name. ``item_errors`` maps an item to its own code, so a handler can fail some topics
and let the rest through (pass ``NONE`` as ``error_code`` and name the failed items). An item is named by its topic
name or topic id (KIP-516), ``(topic, partition)`` for a single partition, the coordinator key (FindCoordinator
v4+), or the entity as a tuple of ``(entity_type, entity_name)`` pairs (AlterClientQuotas); a partition not named
itself takes its topic's code. ``throttle_time_ms`` is set where the version has the field, ``error_message`` where
the schema has one. :func:`encode_local_response` frames the result for the wire.

Two cases stay with the caller: a Produce with ``acks=0`` gets no response at all, and an ApiVersions request of a
version the broker does not speak is answered with a v0 body (:func:`proxy.codec.messages.api_versions_unsupported_body`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from proxy.codec.apis import api_name, has_throttle_time
from proxy.codec.header import encode_response_header, frame
from proxy.codec.messages import DECODED_APIS, Message, encode_response, new_response
from proxy.codec.primitives import ZERO_UUID
from proxy.codec.reassignment_responses import reassignment_errors

ItemErrors = Mapping[Hashable, int]

_NO_OFFSET = -1  # Kafka's INVALID_OFFSET, INVALID_HIGH_WATERMARK and NO_TIMESTAMP
_NO_NODE = {"node_id": -1, "host": "", "port": -1}  # Kafka's Node.noNode()


def error_response(
    api_key: int,
    version: int,
    request: Message,
    error_code: int,
    *,
    item_errors: ItemErrors | None = None,
    throttle_time_ms: int = 0,
    error_message: str | None = None,
) -> Message:
    """The response failing ``request`` (decoded, of ``version``) with ``error_code``, item by item as above."""
    if api_key not in DECODED_APIS:
        raise ValueError(f"no error response for {api_name(api_key)}: the proxy does not decode it")
    codes = _Codes(error_code, item_errors or {})
    fields = _BUILDERS[api_key](version, request, codes, error_message)
    if has_throttle_time(api_key, version):
        fields["throttle_time_ms"] = throttle_time_ms
    return new_response(api_key, version, **fields)


def encode_local_response(api_key: int, version: int, correlation_id: int, msg: Message) -> bytes:
    """The whole response frame: 4-byte size, the response header of ``version`` (v0 or v1), the body."""
    return frame(encode_response_header(api_key, version, correlation_id) + encode_response(api_key, version, msg))


class _Codes:
    """The code of each item: its own from ``item_errors``, else its topic's, else the request's."""

    __slots__ = ("default", "items")

    def __init__(self, default: int, items: ItemErrors) -> None:
        self.default = default
        self.items = items

    def item(self, key: Hashable) -> int:
        return self.items.get(key, self.default)

    def topic(self, name: str | None, topic_id: uuid.UUID | None = None) -> int:
        for key in _topic_keys(name, topic_id):
            if key in self.items:
                return self.items[key]
        return self.default

    def partition(self, name: str | None, topic_id: uuid.UUID | None, partition: int) -> int:
        keys = _topic_keys(name, topic_id)
        for key in keys:
            if (key, partition) in self.items:
                return self.items[(key, partition)]
        return self.topic(name, topic_id)


def _topic_keys(name: str | None, topic_id: uuid.UUID | None) -> tuple[Any, ...]:
    """The keys a topic is known by: its name (v12- requests) and its id (KIP-516), whichever it has."""
    keys: tuple[Any, ...] = (name,) if name else ()
    if topic_id is not None and topic_id != ZERO_UUID:
        keys += (topic_id,)
    return keys


def _produce(version: int, request: Message, codes: _Codes, message: str | None) -> dict[Any, Any]:
    return {
        "responses": [
            {
                "name": t.name,
                "topic_id": t.topic_id,
                "partition_responses": [
                    {
                        "index": p.index,
                        "error_code": codes.partition(t.name, t.topic_id, p.index),
                        "error_message": message,
                        "base_offset": _NO_OFFSET,
                        "log_append_time_ms": _NO_OFFSET,
                        "log_start_offset": _NO_OFFSET,
                    }
                    for p in t.partition_data
                ],
            }
            for t in request.topic_data
        ]
    }


def _fetch(version: int, request: Message, codes: _Codes, message: str | None) -> dict[Any, Any]:
    return {
        "error_code": codes.default,
        "session_id": request.session_id,
        "responses": [
            {
                "topic": t.topic,
                "topic_id": t.topic_id,
                "partitions": [
                    {
                        "partition_index": p.partition,
                        "error_code": codes.partition(t.topic, t.topic_id, p.partition),
                        "high_watermark": _NO_OFFSET,
                        "last_stable_offset": _NO_OFFSET,
                        "log_start_offset": _NO_OFFSET,
                    }
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ],
    }


def _metadata(version: int, request: Message, codes: _Codes, message: str | None) -> dict[Any, Any]:
    # topics None asks for all topics: nothing to name. A topic asked for by id has no name; Kafka answers "".
    return {
        "error_code": codes.default,
        "topics": [
            {"name": t.name or "", "topic_id": t.topic_id, "error_code": codes.topic(t.name, t.topic_id)}
            for t in request.topics or ()
        ],
    }


def _find_coordinator(version: int, request: Message, codes: _Codes, message: str | None) -> dict[Any, Any]:
    if version < 4:
        return {"error_code": codes.default, "error_message": message, **_NO_NODE}
    return {
        "coordinators": [
            {"key": key, "error_code": codes.item(key), "error_message": message, **_NO_NODE}
            for key in request.coordinator_keys
        ]
    }


def _create_topics(version: int, request: Message, codes: _Codes, message: str | None) -> dict[Any, Any]:
    return {
        "topics": [
            {
                "name": t.name,
                "error_code": codes.topic(t.name),
                "error_message": message,
                "num_partitions": -1,
                "replication_factor": -1,
            }
            for t in request.topics
        ]
    }


def _delete_topics(version: int, request: Message, codes: _Codes, message: str | None) -> dict[Any, Any]:
    if version >= 6:
        topics = [(t.name, t.topic_id) for t in request.topics]
    else:
        topics = [(name, ZERO_UUID) for name in request.topic_names]
    return {
        "responses": [
            {"name": name, "topic_id": topic_id, "error_code": codes.topic(name, topic_id), "error_message": message}
            for name, topic_id in topics
        ]
    }


def _create_partitions(version: int, request: Message, codes: _Codes, message: str | None) -> dict[Any, Any]:
    return {
        "results": [
            {"name": t.name, "error_code": codes.topic(t.name), "error_message": message} for t in request.topics
        ]
    }


def _delete_records(version: int, request: Message, codes: _Codes, message: str | None) -> dict[Any, Any]:
    return {
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "low_watermark": _NO_OFFSET,
                        "error_code": codes.partition(t.name, None, p.partition_index),
                    }
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ]
    }


def _offset_commit(version: int, request: Message, codes: _Codes, message: str | None) -> dict[Any, Any]:
    """OffsetCommit and TxnOffsetCommit: per partition, each topic by its name (or its id, OffsetCommit v10+)."""
    topics = []
    for t in request.topics:
        topic_id = getattr(t, "topic_id", None)
        topics.append(
            {
                "name": t.name,
                **({} if topic_id is None else {"topic_id": topic_id}),
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": codes.partition(t.name, topic_id, p.partition_index),
                    }
                    for p in t.partitions
                ],
            }
        )
    return {"topics": topics}


def _txn_topics(topics: list[Any], codes: _Codes) -> list[Any]:
    return [
        {
            "name": t.name,
            "results_by_partition": [
                {"partition_index": p, "partition_error_code": codes.partition(t.name, None, p)} for p in t.partitions
            ],
        }
        for t in topics
    ]


def _add_partitions_to_txn(version: int, request: Message, codes: _Codes, message: str | None) -> dict[Any, Any]:
    if version < 4:
        return {"results_by_topic_v3_and_below": _txn_topics(request.v3_and_below_topics, codes)}
    return {
        "error_code": codes.default if codes.default and not codes.items else 0,
        "results_by_transaction": [
            {"transactional_id": txn.transactional_id, "topic_results": _txn_topics(txn.topics, codes)}
            for txn in request.transactions
        ],
    }


def _write_txn_markers(version: int, request: Message, codes: _Codes, message: str | None) -> dict[Any, Any]:
    return {
        "markers": [
            {
                "producer_id": m.producer_id,
                "topics": [
                    {
                        "name": t.name,
                        "partitions": [
                            {"partition_index": p, "error_code": codes.partition(t.name, None, p)}
                            for p in t.partition_indexes
                        ],
                    }
                    for t in m.topics
                ],
            }
            for m in request.markers
        ]
    }


def _join_group(version: int, request: Message, codes: _Codes, message: str | None) -> dict[Any, Any]:
    # Kafka's JoinGroupRequest.getErrorResponse: no generation, no protocol (null from v7), no leader, no member id.
    return {
        "error_code": codes.default,
        "generation_id": -1,
        "protocol_name": None if version >= 7 else "",
        "leader": "",
        "member_id": "",
        "members": [],
    }


def _sync_group(version: int, request: Message, codes: _Codes, message: str | None) -> dict[Any, Any]:
    return {"error_code": codes.default, "assignment": b""}


def _config_resources(
    results_field: str, extra: dict[Any, Any]
) -> Callable[[int, Message, _Codes, str | None], dict[Any, Any]]:
    def build(version: int, request: Message, codes: _Codes, message: str | None) -> dict[Any, Any]:
        return {
            results_field: [
                {
                    "error_code": codes.item((r.resource_type, r.resource_name)),
                    "error_message": message,
                    "resource_type": r.resource_type,
                    "resource_name": r.resource_name,
                    **extra,
                }
                for r in request.resources
            ]
        }

    return build


def _init_producer_id(version: int, request: Message, codes: _Codes, message: str | None) -> dict[Any, Any]:
    return {"error_code": codes.default, "producer_id": -1, "producer_epoch": -1}


def _describe_client_quotas(version: int, request: Message, codes: _Codes, message: str | None) -> dict[Any, Any]:
    return {"error_code": codes.default, "error_message": message, "entries": None}


def _alter_client_quotas(version: int, request: Message, codes: _Codes, message: str | None) -> dict[Any, Any]:
    entries = []
    for entry in request.entries:
        entity = [(e.entity_type, e.entity_name) for e in entry.entity]
        entries.append(
            {
                "error_code": codes.item(tuple(entity)),
                "error_message": message,
                "entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity],
            }
        )
    return {"entries": entries}


def _error_code_only(version: int, request: Message, codes: _Codes, message: str | None) -> dict[Any, Any]:
    return {"error_code": codes.default}


def _error_code_and_message(version: int, request: Message, codes: _Codes, message: str | None) -> dict[Any, Any]:
    return {"error_code": codes.default, "error_message": message}


_BUILDERS: dict[int, Callable[[int, Message, _Codes, str | None], dict[Any, Any]]] = {
    0: _produce,
    1: _fetch,
    3: _metadata,
    8: _offset_commit,
    28: _offset_commit,
    10: _find_coordinator,
    11: _join_group,
    14: _sync_group,
    17: _error_code_only,
    18: _error_code_only,
    19: _create_topics,
    20: _delete_topics,
    21: _delete_records,
    22: _init_producer_id,
    24: _add_partitions_to_txn,
    27: _write_txn_markers,
    32: _config_resources("results", {"configs": []}),
    33: _config_resources("responses", {}),
    36: _error_code_and_message,
    37: _create_partitions,
    44: _config_resources("responses", {}),
    45: reassignment_errors,
    47: _error_code_only,
    48: _describe_client_quotas,
    49: _alter_client_quotas,
    60: _error_code_and_message,
    68: _error_code_and_message,
    76: _error_code_and_message,
    78: _error_code_and_message,
    79: _error_code_and_message,
    88: _error_code_and_message,
    91: _error_code_and_message,
    92: _error_code_and_message,
}
