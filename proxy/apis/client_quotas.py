"""DescribeClientQuotas (48) and AlterClientQuotas (49), served by the proxy when a dynamic config is configured.

So ``kafka-configs.sh --bootstrap-server <proxy>`` and the admin clients' describe/alter client quotas work against
the proxy unchanged, whether or not the broker has client quotas. Both are advertised in ApiVersions (v0-1) even
when the broker does not list them.

- Describe answers from the effective configuration (YAML with the dynamic entries over it), with Kafka's filter
  rules: each component matches an entity type exactly (``match_type`` 0, a name), its default (1) or any name
  (2); ``strict`` also requires the entity to have no other type. A filter mixing ``ip`` with ``user`` or
  ``client-id`` is INVALID_REQUEST (KIP-612).
- Alter is allowed only to principals in ``admin_principals`` (``User:<name>``; empty by default): anyone else
  gets CLUSTER_AUTHORIZATION_FAILED on every entry. Each entry is checked as the config topic's reader will check it
  (unknown keys, bad values, an ip combined with a user: INVALID_REQUEST with a message); ``validate_only`` stops
  there. The valid entries are then written to the config topic, and the answer goes back once the write is
  acknowledged; every proxy following the topic applies them.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

from config.dynamic import DynamicEntries, RecordError, describe, entity_key, parse_key
from proxy.apis.plan import PASS, AnswerLocally, Await, ConnectionScope, Plan
from proxy.session.session import Session
from proxy.codec.apis import ALTER_CLIENT_QUOTAS, DESCRIBE_CLIENT_QUOTAS
from proxy.codec.enums import MATCH_TYPE_DEFAULT, MATCH_TYPE_EXACT, MATCH_TYPE_SPECIFIED
from proxy.codec.error_codes import CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST, NONE, UNKNOWN_SERVER_ERROR
from proxy.codec.frame import BUFFER
from proxy.codec.header import RequestHeader
from proxy.codec.messages import decode_request, new_response
from proxy.codec.responses import encode_local_response
from quota.entity import DEFAULT

if TYPE_CHECKING:
    from proxy.observers.dynamic_config import DynamicConfig

VERSIONS = (0, 1)
ENTITY_TYPES = ("user", "client-id", "ip")


def served(scope: ConnectionScope) -> bool:
    return scope.client_quotas is not None


def plan_describe(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    if not served(scope):
        return PASS
    version, correlation_id = header.api_version, header.correlation_id

    def decide(body: memoryview) -> AnswerLocally:
        msg = decode_request(DESCRIBE_CLIENT_QUOTAS, version, body)
        response = describe_response(version, msg, scope.client_quotas.current)
        return AnswerLocally(encode_local_response(DESCRIBE_CLIENT_QUOTAS, version, correlation_id, response))

    return Plan(action=BUFFER, decide=decide)


def describe_response(version: int, msg, config):
    types = [c.entity_type for c in msg.components]
    error = None
    if len(set(types)) != len(types):
        error = "a filter names an entity type twice"
    elif "ip" in types and len(types) > 1:
        error = "an ip filter cannot be combined with user or client-id (KIP-612)"
    elif any(t not in ENTITY_TYPES for t in types):
        error = f"unknown entity type in the filter (known: {', '.join(ENTITY_TYPES)})"
    elif any(c.match_type not in (MATCH_TYPE_EXACT, MATCH_TYPE_DEFAULT, MATCH_TYPE_SPECIFIED) for c in msg.components):
        error = "match_type must be 0 (exact), 1 (default) or 2 (any)"
    if error is not None:
        return new_response(DESCRIBE_CLIENT_QUOTAS, version, error_code=INVALID_REQUEST, error_message=error,
                            entries=None)
    entries = []
    for entity, values in describe(config):
        if matches(entity, msg.components, msg.strict) and values:
            entries.append({"entity": [{"entity_type": t, "entity_name": None if n == DEFAULT else n}
                                       for t, n in sorted(entity.items())],
                            "values": [{"key": k, "value": float(v)} for k, v in sorted(values.items())]})
    return new_response(DESCRIBE_CLIENT_QUOTAS, version, error_code=NONE, error_message=None, entries=entries)


def matches(entity: dict, components, strict: bool) -> bool:
    for c in components:
        name = entity.get(c.entity_type)
        if name is None:
            return False
        if c.match_type == MATCH_TYPE_EXACT and (name == DEFAULT or name != c.match):
            return False
        if c.match_type == MATCH_TYPE_DEFAULT and name != DEFAULT:
            return False
    return not strict or len(entity) == len(components)


def plan_alter(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    if not served(scope):
        return PASS
    version, correlation_id = header.api_version, header.correlation_id
    dynamic: DynamicConfig = scope.client_quotas

    def answer(results: list[tuple[list, int, str | None]]) -> AnswerLocally:
        response = new_response(ALTER_CLIENT_QUOTAS, version, entries=[
            {"error_code": code, "error_message": message, "entity": entity} for entity, code, message in results])
        return AnswerLocally(encode_local_response(ALTER_CLIENT_QUOTAS, version, correlation_id, response))

    def decide(body: memoryview):
        msg = decode_request(ALTER_CLIENT_QUOTAS, version, body)
        wire = [[{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]
                for entry in msg.entries]
        principal = f"User:{session.user}"
        if principal not in dynamic.base.admin_principals:
            reason = (f"{principal} may not alter quotas through the proxy (admin_principals in the proxy's "
                      "configuration)")
            return answer([(entity, CLUSTER_AUTHORIZATION_FAILED, reason) for entity in wire])
        results, records = check(dynamic, msg.entries)
        if msg.validate_only or not records:
            return answer([(entity, code, message) for entity, (code, message) in zip(wire, results)])

        def written(result) -> AnswerLocally:
            if isinstance(result, BaseException):
                failure = dynamic.write_failure(result)
                return answer([(entity, UNKNOWN_SERVER_ERROR if code == NONE else code,
                                failure if code == NONE else message)
                               for entity, (code, message) in zip(wire, results)])
            return answer([(entity, code, message) for entity, (code, message) in zip(wire, results)])

        return Await(start=lambda: dynamic.write(records), then=written)

    return Plan(action=BUFFER, decide=decide)


def check(dynamic: "DynamicConfig", entries) -> tuple[list[tuple[int, str | None]], list[tuple[bytes, bytes | None]]]:
    """Each entry's (error code, message), and the records for the valid ones (applied one after another, as the
    topic's reader will)."""
    state: DynamicEntries = dynamic.entries
    results, records = [], []
    for entry in entries:
        try:
            entity = {}
            for part in entry.entity:
                if part.entity_type not in ENTITY_TYPES:
                    raise RecordError(f"unknown entity type {part.entity_type!r} (known: {', '.join(ENTITY_TYPES)})")
                if part.entity_type in entity:
                    raise RecordError(f"entity type {part.entity_type} given twice")
                entity[part.entity_type] = DEFAULT if part.entity_name is None else part.entity_name
            if not entity:
                raise RecordError("an entry without an entity")
            key = entity_key(parse_key(entity_key(entity)))  # canonical (an IPv4-mapped address as IPv4)
            current = dict(state.entries[key][1]) if key in state.entries else {}
            for op in entry.ops:
                if op.remove:
                    current.pop(op.key, None)
                else:
                    if not math.isfinite(op.value):
                        raise RecordError(f"{op.key}: {op.value} is not a finite number")
                    current[op.key] = int(op.value) if op.value == int(op.value) and op.key.endswith("byte_rate") \
                        else op.value
            value = json.dumps(current, sort_keys=True).encode() if current else None
            state = state.with_record(dynamic.base, key, value)
        except RecordError as exc:
            results.append((INVALID_REQUEST, str(exc)[:500]))
            continue
        records.append((key, value))
        results.append((NONE, None))
    return results, records
