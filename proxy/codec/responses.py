"""Responses the proxy builds itself: the answer a broker would give to fail a request, for the request's version.

:func:`error_response` knows where each decoded API carries its errors: per partition (Produce, Fetch), per topic
(Metadata, CreateTopics, DeleteTopics, CreatePartitions), per entry (AlterClientQuotas, FindCoordinator v4+) or at
top level (the rest). Every item gets ``error_code`` unless ``item_errors`` names another for it (a topic name, or
``(topic, partition)``), so a handler can fail some items and not others. ``throttle_time_ms`` and
``error_message`` are set where the version has them. :func:`encode_local_response` frames it for the wire.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from proxy.codec.apis import api_name
from proxy.codec.header import encode_response_header, frame
from proxy.codec.messages import DECODED_APIS, Message, encode_response, message_class, new_response

ItemErrors = Mapping[object, int]


def error_response(api_key: int, version: int, request: Message, error_code: int, *,
                   item_errors: ItemErrors | None = None, throttle_time_ms: int = 0,
                   error_message: str | None = None) -> Message:
    """The response failing ``request`` (decoded, of ``version``) with ``error_code``."""
    if api_key not in DECODED_APIS:
        raise ValueError(f"no error response for {api_name(api_key)}: the proxy does not decode it")
    errors = item_errors or {}
    build = _BUILDERS.get(api_key, _top_level)
    fields = build(version, request, error_code, errors, error_message)
    fields["throttle_time_ms"] = throttle_time_ms
    known = message_class(api_key, version, "response").__slots__
    return new_response(api_key, version, **{name: value for name, value in fields.items() if name in known})


def encode_local_response(api_key: int, version: int, correlation_id: int, msg: Message) -> bytes:
    """The whole response frame: size, the response header of the version, the body."""
    return frame(encode_response_header(api_key, version, correlation_id) + encode_response(api_key, version, msg))


def _code(errors: ItemErrors, key: object, default: int) -> int:
    return errors.get(key, default)


def _top_level(version, request, code, errors, message) -> dict:
    return {"error_code": code, "error_message": message}


def _produce(version, request, code, errors, message) -> dict:
    return {"responses": [
        {"name": topic.name, "topic_id": topic.topic_id, "partition_responses": [
            {"index": p.index, "error_code": _code(errors, (topic.name, p.index), _code(errors, topic.name, code)),
             "base_offset": -1, "error_message": message}
            for p in topic.partition_data]}
        for topic in request.topic_data]}


def _fetch(version, request, code, errors, message) -> dict:
    return {"error_code": code if not errors else 0, "responses": [
        {"topic": topic.topic, "topic_id": topic.topic_id, "partitions": [
            {"partition_index": p.partition, "high_watermark": -1,
             "error_code": _code(errors, (topic.topic, p.partition), _code(errors, topic.topic, code))}
            for p in topic.partitions]}
        for topic in request.topics]}


def _metadata(version, request, code, errors, message) -> dict:
    topics = request.topics or []
    # a topic asked for by id has no name; the response's name is nullable only from v12 on
    return {"topics": [{"name": t.name if t.name is not None or version >= 12 else "", "topic_id": t.topic_id,
                        "error_code": _code(errors, t.name, code)} for t in topics]}


def _create_topics(version, request, code, errors, message) -> dict:
    return {"topics": [{"name": t.name, "error_code": _code(errors, t.name, code), "error_message": message,
                        "num_partitions": -1, "replication_factor": -1} for t in request.topics]}


def _delete_topics(version, request, code, errors, message) -> dict:
    if version >= 6:
        names = [(t.name, t.topic_id) for t in request.topics]
    else:
        names = [(name, None) for name in request.topic_names]
    return {"responses": [{"name": name, "topic_id": topic_id, "error_code": _code(errors, name, code),
                           "error_message": message} for name, topic_id in names]}


def _create_partitions(version, request, code, errors, message) -> dict:
    return {"results": [{"name": t.name, "error_code": _code(errors, t.name, code), "error_message": message}
                        for t in request.topics]}


def _find_coordinator(version, request, code, errors, message) -> dict:
    if version < 4:
        return {"error_code": code, "error_message": message, "node_id": -1, "port": -1}
    return {"coordinators": [{"key": key, "error_code": _code(errors, key, code), "error_message": message,
                              "node_id": -1, "port": -1} for key in request.coordinator_keys]}


def _alter_client_quotas(version, request, code, errors, message) -> dict:
    return {"entries": [{"error_code": code, "error_message": message,
                         "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]}
                        for entry in request.entries]}


_BUILDERS: dict[int, Callable[..., dict]] = {
    0: _produce, 1: _fetch, 3: _metadata, 10: _find_coordinator, 19: _create_topics, 20: _delete_topics,
    37: _create_partitions, 49: _alter_client_quotas,
}
