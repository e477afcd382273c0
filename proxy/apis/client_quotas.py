"""DescribeClientQuotas (48) and AlterClientQuotas (49), served by the proxy when a dynamic config is configured.

So ``kafka-configs.sh --bootstrap-server <proxy>`` and the admin clients' describe/alter client quotas work against
the proxy unchanged, whether or not the broker has client quotas. Both are advertised in ApiVersions (v0-1) even
when the broker does not list them.

- Describe answers from the effective configuration (YAML with the dynamic entries over it), with Kafka's filter
  rules: each component matches an entity type exactly (``match_type`` 0, a name), its default (1) or any name
  (2); ``strict`` also requires the entity to have no other type. A filter mixing ``ip`` with ``user`` or
  ``client-id`` is INVALID_REQUEST (KIP-612), as is one mixing ``topic`` or ``group`` (the proxy's topic and group
  quotas: no broker knows those entity types, so a filter naming one is answered by the proxy alone) with any other
  type (but ``topic`` with ``partition``, the proxy's partition quotas). When the broker serves the API the request also goes to it, and the
  keys the brokers enforce (``request_percentage``, KIP-124; any key the proxy does not enforce) are merged in from
  its answer; the proxy's own keys always come from the proxy.
- Alter is allowed only to principals in ``admin_principals`` (``User:<name>``; empty by default) and to
  connections of the admin listener (``listeners[].admin``): anyone else gets CLUSTER_AUTHORIZATION_FAILED on
  every entry, and nothing reaches the broker. Each entry is checked as the
  config topic's reader will check it (unknown keys, bad values, an ip combined with a user: INVALID_REQUEST with a
  message); ``validate_only`` stops there. The keys the brokers enforce (:data:`config.quotas.BROKER_KEYS`) are
  sent first to the broker behind the connection, in an AlterClientQuotas of the proxy's holding only those
  (the broker, or its controller, applies them cluster-wide, and its own authorizer decides too); an entry the
  broker refuses keeps its error and none of its keys is written. The valid entries' other keys are then written
  to the config topic, and the answer goes back once the write is acknowledged; every proxy following the topic
  applies them. A broker without the API (Tansu) gets nothing: those entries are answered UNSUPPORTED_VERSION.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from config.dynamic import DynamicEntries, RecordError, describe, entity_key, parse_key
from config.quotas import BROKER_KEYS, ENFORCED_KEYS
from proxy.apis.api_versions import knowing_broker_versions
from proxy.apis.plan import PASS, AnswerLocally, Await, ConnectionScope, ForwardRequest, LookUp, Outcome, Plan
from proxy.apis.response_leg import ResponseLeg
from proxy.codec.apis import ALTER_CLIENT_QUOTAS, DESCRIBE_CLIENT_QUOTAS
from proxy.codec.enums import MATCH_TYPE_DEFAULT, MATCH_TYPE_EXACT, MATCH_TYPE_SPECIFIED
from proxy.codec.error_codes import (
    CLUSTER_AUTHORIZATION_FAILED,
    INVALID_REQUEST,
    NONE,
    UNKNOWN_SERVER_ERROR,
    UNSUPPORTED_VERSION,
)
from proxy.codec.frame import BUFFER
from proxy.codec.header import RequestHeader
from proxy.codec.messages import (
    Message,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    new_request,
    new_response,
)
from proxy.codec.responses import encode_local_response
from proxy.session.session import Session
from quota.managers.connection import CONNECTION_CREATION_RATE
from quota.primitives.entity import DEFAULT
from quota.primitives.group_quotas import GROUP
from quota.primitives.quota_groups import QUOTA_GROUP
from quota.primitives.topic_quotas import PARTITION, TOPIC

if TYPE_CHECKING:
    from config.dynamic import Record
    from config.model import ProxyConfig
    from proxy.apis.config_topic import ConfigTopic

Part = tuple[str, "str | None"]  # one part of an entity: (entity type, name; None: the default)
Wire = list[dict[str, "str | None"]]  # an entry's entity as the codec builds it

VERSIONS = (0, 1)
ENTITY_TYPES = ("user", "client-id", "ip", TOPIC, PARTITION, GROUP)
ALONE = {  # an entity type, what it may be combined with in a filter, and why not with anything else
    "ip": ((), "an ip filter cannot be combined with user or client-id (KIP-612)"),
    TOPIC: ((PARTITION,), "a topic filter stands alone, or with a partition"),
    PARTITION: ((TOPIC,), "a partition filter goes with a topic filter only"),
    GROUP: ((), "a group filter stands alone"),
}
PROXY_ENTITY_TYPES = (TOPIC, PARTITION, GROUP)  # the proxy's own: no broker knows them, nothing of them goes there
PROXY_KEYS = frozenset(ENFORCED_KEYS) | {CONNECTION_CREATION_RATE}  # described from the proxy, never the broker


def plan_describe(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    dynamic = scope.client_quotas
    if dynamic is None:
        return PASS
    version, correlation_id = header.api_version, header.correlation_id

    def decide(body: memoryview) -> Outcome:
        msg = decode_request(DESCRIBE_CLIENT_QUOTAS, version, body)

        def local() -> AnswerLocally:
            response = describe_response(version, msg, dynamic.current)
            return AnswerLocally(encode_local_response(DESCRIBE_CLIENT_QUOTAS, version, correlation_id, response))

        if filter_error(msg) is not None or any(c.entity_type in PROXY_ENTITY_TYPES for c in msg.components):
            return local()  # topic and group entities are the proxy's alone: no broker knows them

        def to_broker() -> Outcome:
            supported = (session.broker_lookup_versions or {}).get(DESCRIBE_CLIENT_QUOTAS)
            if supported is None or not supported[0] <= version <= supported[1]:
                return local()  # a broker without client quotas (Tansu): the proxy's alone

            def merge(reply: memoryview) -> bytes:
                theirs = decode_response(DESCRIBE_CLIENT_QUOTAS, version, reply)
                return encode_response(
                    DESCRIBE_CLIENT_QUOTAS,
                    version,
                    describe_response(version, msg, dynamic.current, theirs),
                )

            return ForwardRequest(leg=ResponseLeg(rewrite=merge))

        return knowing_broker_versions(session, to_broker)

    return Plan(action=BUFFER, decide=decide)


def filter_error(msg: Message) -> str | None:
    """Why a DescribeClientQuotas filter is invalid (KIP-546, KIP-612), or None."""
    types = [c.entity_type for c in msg.components]
    if len(set(types)) != len(types):
        return "a filter names an entity type twice"
    for kind, (beside, why) in ALONE.items():
        if kind in types and any(t != kind and t not in beside for t in types):
            return why
    if any(t not in ENTITY_TYPES for t in types):
        return f"unknown entity type in the filter (known: {', '.join(ENTITY_TYPES)})"
    if any(c.match_type not in (MATCH_TYPE_EXACT, MATCH_TYPE_DEFAULT, MATCH_TYPE_SPECIFIED) for c in msg.components):
        return "match_type must be 0 (exact), 1 (default) or 2 (any)"
    return None


def describe_response(version: int, msg: Message, config: ProxyConfig, broker: Message | None = None) -> Message:
    """The answer to ``msg``: the proxy's entries from ``config`` and, from the broker's answer ``broker`` (None:
    not asked), the values of the keys the proxy does not enforce, and its throttle. A broker's error (its
    authorizer refusing this principal) leaves its entries out."""
    error = filter_error(msg)
    if error is not None:
        return new_response(
            DESCRIBE_CLIENT_QUOTAS, version, error_code=INVALID_REQUEST, error_message=error, entries=None
        )
    entries: dict[frozenset[Part], tuple[list[Part], dict[str, float]]] = {}
    for entity, values in describe(config):
        if matches(entity, msg.components, msg.strict) and values:
            parts = [(t, None if n == DEFAULT else n) for t, n in sorted(entity.items())]
            entries[frozenset(parts)] = (parts, {k: float(v) for k, v in values.items()})
    throttle_time_ms = 0
    if broker is not None and broker.error_code == NONE:
        throttle_time_ms = broker.throttle_time_ms
        for entry in broker.entries or ():
            theirs = {v.key: v.value for v in entry.values if v.key not in PROXY_KEYS}
            if not theirs:
                continue
            parts = sorted((e.entity_type, e.entity_name) for e in entry.entity)
            entries.setdefault(frozenset(parts), (parts, {}))[1].update(theirs)
    return new_response(
        DESCRIBE_CLIENT_QUOTAS,
        version,
        error_code=NONE,
        error_message=None,
        throttle_time_ms=throttle_time_ms,
        entries=[
            {
                "entity": [{"entity_type": t, "entity_name": n} for t, n in parts],
                "values": [{"key": k, "value": v} for k, v in sorted(values.items())],
            }
            for parts, values in entries.values()
        ],
    )


def matches(entity: Mapping[str, str], components: Sequence[Message], strict: bool) -> bool:
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
    dynamic = scope.client_quotas
    if dynamic is None:
        return PASS
    version, correlation_id = header.api_version, header.correlation_id

    def answer(wire: list[Wire], results: list[tuple[int, str | None]], throttle_time_ms: int = 0) -> AnswerLocally:
        response = new_response(
            ALTER_CLIENT_QUOTAS,
            version,
            throttle_time_ms=throttle_time_ms,
            entries=[
                {"error_code": code, "error_message": message, "entity": entity}
                for entity, (code, message) in zip(wire, results)
            ],
        )
        return AnswerLocally(encode_local_response(ALTER_CLIENT_QUOTAS, version, correlation_id, response))

    def decide(body: memoryview) -> Outcome:
        msg = decode_request(ALTER_CLIENT_QUOTAS, version, body)
        wire: list[Wire] = [
            [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]
            for entry in msg.entries
        ]
        if not session.is_admin(dynamic.base.admin_principals):
            reason = (
                f"User:{session.user} may not alter quotas through the proxy (admin_principals in the proxy's "
                "configuration, or its admin listener)"
            )
            return answer(wire, [(CLUSTER_AUTHORIZATION_FAILED, reason)] * len(wire))
        ours = [[op for op in entry.ops if op.key not in BROKER_KEYS] for entry in msg.entries]
        theirs = [[op for op in entry.ops if op.key in BROKER_KEYS] for entry in msg.entries]
        failed: list[tuple[int, str | None] | None] = [None] * len(wire)
        for i, entry in enumerate(msg.entries):
            own = next((p.entity_type for p in entry.entity if p.entity_type in PROXY_ENTITY_TYPES), None)
            if theirs[i] and own is not None:
                failed[i] = (INVALID_REQUEST, f"{theirs[i][0].key}: not a key of {own} entities")
                theirs[i] = []  # a topic or group entity is the proxy's: nothing of it goes to the broker

        def write(throttle_time_ms: int = 0) -> Outcome:
            """The proxy's part of every entry not failed yet: checked, then written (unless validate_only)."""
            results, records = check(dynamic, [(entry.entity, ops) for entry, ops in zip(msg.entries, ours)], failed)
            if msg.validate_only or not records:
                return answer(wire, results, throttle_time_ms)

            def written(result: object) -> AnswerLocally:
                if isinstance(result, BaseException):
                    failure = dynamic.write_failure(result)
                    return answer(
                        wire,
                        [
                            (UNKNOWN_SERVER_ERROR, failure) if code == NONE else (code, message)
                            for code, message in results
                        ],
                        throttle_time_ms,
                    )
                return answer(wire, results, throttle_time_ms)

            author = (f"User:{session.user}", session.peer_ip, session.through("AlterClientQuotas"))
            return Await(start=lambda: dynamic.write(records, *author), then=written)  # audited by the writer

        if not any(theirs):
            return write()

        def to_broker() -> Outcome:
            supported = (session.broker_lookup_versions or {}).get(ALTER_CLIENT_QUOTAS)
            if supported is None or not supported[0] <= version <= supported[1]:
                for i, ops in enumerate(theirs):
                    if ops:
                        failed[i] = (UNSUPPORTED_VERSION, _unsupported(ops, "AlterClientQuotas", version))
                return write()
            # an entry whose own keys are invalid is refused whole: its brokers' keys are not sent
            first, _ = check(dynamic, [(entry.entity, ops) for entry, ops in zip(msg.entries, ours)], failed)
            sent = [i for i, ops in enumerate(theirs) if ops and first[i][0] == NONE]
            if not sent:
                return write()
            request = new_request(
                ALTER_CLIENT_QUOTAS,
                version,
                validate_only=msg.validate_only,
                entries=[
                    {
                        "entity": wire[i],
                        "ops": [{"key": op.key, "value": op.value, "remove": op.remove} for op in theirs[i]],
                    }
                    for i in sent
                ],
            )

            def answered(reply: memoryview) -> Outcome:
                response = decode_response(ALTER_CLIENT_QUOTAS, version, reply)
                outcome = {_entity_key(e.entity): (e.error_code, e.error_message) for e in response.entries}
                for i in sent:
                    code, message = outcome.get(
                        _entity_key(msg.entries[i].entity),
                        (UNKNOWN_SERVER_ERROR, "the broker did not answer this entry"),
                    )
                    if code != NONE:
                        failed[i] = (code, message)
                return write(response.throttle_time_ms)

            return LookUp(
                ALTER_CLIENT_QUOTAS,
                version,
                encode_request(ALTER_CLIENT_QUOTAS, version, request),
                answered,
                client_id=header.client_id,
            )

        return knowing_broker_versions(session, to_broker)

    return Plan(action=BUFFER, decide=decide)


def _unsupported(ops: Iterable[Message], api: str, version: int) -> str:
    keys = ", ".join(sorted({op.key for op in ops}))
    return (
        f"{keys}: enforced by the brokers, and the broker behind the proxy does not serve {api} v{version}; "
        "set it where the brokers support client quotas"
    )


def _entity_key(parts: Iterable[Message]) -> frozenset[tuple[str, str | None]]:
    return frozenset((p.entity_type, p.entity_name) for p in parts)


def check(
    dynamic: ConfigTopic,
    entries: Iterable[tuple[Iterable[Message], list[Message]]],
    failed: Sequence[tuple[int, str | None] | None] | None = None,
) -> tuple[list[tuple[int, str | None]], list[Record]]:
    """Each entry's (error code, message), and the records for the valid ones (applied one after another, as the
    topic's reader will). ``entries``: (entity parts, the ops the proxy applies); ``failed``: per entry, an error
    decided already (the entry is skipped and keeps it), or None. An entry with no op of the proxy's is checked for
    its entity only and writes nothing."""
    state: DynamicEntries = dynamic.entries
    results: list[tuple[int, str | None]] = []
    records: list[Record] = []
    for i, (parts, ops) in enumerate(entries):
        already = None if failed is None else failed[i]
        if already is not None:
            results.append(already)
            continue
        try:
            entity: dict[str, str] = {}
            for part in parts:
                if part.entity_type not in ENTITY_TYPES and part.entity_type != QUOTA_GROUP:  # parse_key says why
                    raise RecordError(f"unknown entity type {part.entity_type!r} (known: {', '.join(ENTITY_TYPES)})")
                if part.entity_type in entity:
                    raise RecordError(f"entity type {part.entity_type} given twice")
                entity[part.entity_type] = DEFAULT if part.entity_name is None else part.entity_name
            if not entity:
                raise RecordError("an entry without an entity")
            key = entity_key(parse_key(entity_key(entity)))  # canonical (an IPv4-mapped address as IPv4)
            if not ops:
                results.append((NONE, None))
                continue
            current: dict[str, object] = dict(state.entries[key][1]) if key in state.entries else {}
            for op in ops:
                if op.remove:
                    current.pop(op.key, None)
                else:
                    if not math.isfinite(op.value):
                        raise RecordError(f"{op.key}: {op.value} is not a finite number")
                    current[op.key] = (
                        int(op.value) if op.value == int(op.value) and op.key.endswith("byte_rate") else op.value
                    )
            value = json.dumps(current, sort_keys=True).encode() if current else None
            state = state.with_record(dynamic.base, key, value)
        except RecordError as exc:
            results.append((INVALID_REQUEST, str(exc)[:500]))
            continue
        records.append((key, value))
        results.append((NONE, None))
    return results, records
