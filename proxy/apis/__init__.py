"""Per-API handling: a table from API key to the handler that plans what the proxy does with a request.

A handler looks at the request header (and, for buffered requests, the whole frame) and returns a
:class:`~proxy.apis.plan.Plan`: stream the request as is, or answer it locally; and whether the response must
be decoded and rewritten. APIs without a handler pass through untouched, as opaque bytes.
"""

from __future__ import annotations

from collections.abc import Callable

from proxy.apis import (
    addresses,
    api_versions,
    broker_configs,
    byte_rate,
    client_quotas,
    metadata,
    mutations,
    offset_commits,
    producer_ids,
    sasl,
)
from proxy.apis.internal_topics import GUARDED, guarded
from proxy.apis.plan import (
    FORWARD_AS_IS,
    PASS,
    AnswerLocally,
    Await,
    ConnectionScope,
    ForwardRequest,
    HoldFor,
    LookUp,
    Outcome,
    Plan,
)
from proxy.codec.apis import (
    ALTER_CLIENT_QUOTAS,
    API_VERSIONS,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    DESCRIBE_CLIENT_QUOTAS,
    DESCRIBE_CLUSTER,
    DESCRIBE_CONFIGS,
    FETCH,
    FIND_COORDINATOR,
    INCREMENTAL_ALTER_CONFIGS,
    INIT_PRODUCER_ID,
    METADATA,
    OFFSET_COMMIT,
    PRODUCE,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    TXN_OFFSET_COMMIT,
    api_name,
)
from proxy.codec.errors import ProtocolError
from proxy.codec.header import RequestHeader
from proxy.codec.messages import DECODED_APIS
from proxy.session.session import Session

Handler = Callable[[ConnectionScope, Session, RequestHeader], Plan]

HANDLERS: dict[int, Handler] = {
    API_VERSIONS: api_versions.plan,
    METADATA: metadata.plan_metadata,  # cluster mode: broker addresses (the topics pass as the broker's bytes)
    FIND_COORDINATOR: addresses.plan_find_coordinator,
    DESCRIBE_CLUSTER: addresses.plan_describe_cluster,
    PRODUCE: byte_rate.plan_produce,  # quota, then cluster-mode NodeEndpoints
    FETCH: byte_rate.plan_fetch,
    CREATE_TOPICS: mutations.plan_create_topics,  # KIP-599 controller mutation quota
    DELETE_TOPICS: mutations.plan_delete_topics,
    CREATE_PARTITIONS: mutations.plan_create_partitions,
    INIT_PRODUCER_ID: producer_ids.plan_init_producer_id,  # KIP-936 attribution
    OFFSET_COMMIT: offset_commits.plan_offset_commit,  # writes to __consumer_offsets: capped, charged
    TXN_OFFSET_COMMIT: offset_commits.plan_offset_commit,
    DESCRIBE_CLIENT_QUOTAS: client_quotas.plan_describe,  # served by the proxy with a dynamic config
    ALTER_CLIENT_QUOTAS: client_quotas.plan_alter,
    INCREMENTAL_ALTER_CONFIGS: broker_configs.plan_incremental_alter,  # BROKER "": the proxy-wide settings
    DESCRIBE_CONFIGS: broker_configs.plan_describe,
    SASL_HANDSHAKE: sasl.plan_handshake,  # read, never changed: the principal for per-user quotas
    SASL_AUTHENTICATE: sasl.plan_authenticate,
}


# What Kafka serves on a SASL listener before an authentication succeeds; anything else closes the connection.
BEFORE_AUTHENTICATION = frozenset((API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE))


def plan_request(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    if session.awaiting_authentication and header.api_key not in BEFORE_AUTHENTICATION:
        raise ProtocolError(
            f"{api_name(header.api_key)} before SASL authentication completed: only ApiVersions, "
            "SaslHandshake and SaslAuthenticate are served until the broker accepts one"
        )
    handler = HANDLERS.get(header.api_key)
    if handler is None and header.api_key not in GUARDED:  # writes that may name an internal topic are checked
        return PASS
    versions = DECODED_APIS.get(header.api_key)
    if header.api_key != API_VERSIONS and versions is not None and not versions[0] <= header.api_version <= versions[1]:
        # The client's error, not the broker's: no broker speaks this version (Kafka closes the connection too).
        raise ProtocolError(
            f"{api_name(header.api_key)} v{header.api_version} is not a version any Kafka broker "
            f"speaks (v{versions[0]}-v{versions[1]})"
        )
    plan = handler(scope, session, header) if handler is not None else PASS
    return guarded(scope, session, header, plan)


__all__ = [
    "BEFORE_AUTHENTICATION",
    "FORWARD_AS_IS",
    "HANDLERS",
    "PASS",
    "AnswerLocally",
    "Await",
    "ConnectionScope",
    "ForwardRequest",
    "HoldFor",
    "LookUp",
    "Outcome",
    "Plan",
    "Session",
    "plan_request",
]
