"""Per-API handling: each API's requests planned by a declared chain of stages (:mod:`proxy.apis.stages`).

A stage looks at the request header (and, for buffered requests, the whole frame) and returns a
:class:`~proxy.apis.plan.Plan` or nothing: stream the request as is, or answer it locally; and what its response
goes through. :data:`STAGES` declares them in order; an API's chain is those that want it, folded by
:meth:`Plan.then <proxy.apis.plan.Plan.then>`. APIs no stage wants pass through untouched, as opaque bytes, on
the fast path (:data:`PASS`, nothing looked up but the table). Request rate's stage is in an API's chain only while a
``request_rate`` quota counts that API (:data:`UNCOUNTED_CHAINS` otherwise), so its cost is paid only where one is
configured. A consumer's Fetch chain is asked once per connection while what its stages read stays the same
(:mod:`proxy.apis.reuse`, :data:`REUSED_CHAINS`); so is a Produce's, but for the stages that record at its header.
"""

from __future__ import annotations

from config.request_rate import COUNTABLE_APIS
from proxy.apis import (
    addresses,
    api_versions,
    broker_configs,
    broker_writes,
    byte_rate,
    client_quotas,
    internal_topics,
    metadata,
    mutations,
    offset_commits,
    partitions_at_pause,
    producer_ids,
    reassignments,
    request_rate,
    sasl,
    streams_topics,
    topic_rate,
    transactional_ids,
    volume_pause,
)
from proxy.apis.internal_topics import GUARDED
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
from proxy.apis.reuse import REUSABLE, Inputs, reusable, reused, reused_asking
from proxy.apis.stages import Planner, Stage, chains, fold
from proxy.codec.apis import (
    ALTER_CLIENT_QUOTAS,
    ALTER_PARTITION_REASSIGNMENTS,
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
    SHARE_ACKNOWLEDGE,
    SHARE_FETCH,
    STREAMS_GROUP_HEARTBEAT,
    TXN_OFFSET_COMMIT,
    api_name,
)
from proxy.codec.errors import ProtocolError
from proxy.codec.header import RequestHeader
from proxy.codec.messages import DECODED_APIS
from proxy.session.session import Session


def _wants(*api_keys: int) -> frozenset[int]:
    return frozenset(api_keys)


# In the order they plan a request; a request's chain is the stages that want its API.
STAGES = (
    Stage("ApiVersions: the versions both sides speak", _wants(API_VERSIONS), api_versions.plan),
    Stage("SASL: the principal for per-user quotas", _wants(SASL_HANDSHAKE), sasl.plan_handshake),
    Stage("SASL: delegation tokens' owners", _wants(SASL_AUTHENTICATE), sasl.plan_authenticate),
    # cluster mode and the admin listener: every broker address a response carries becomes the proxy's
    Stage("broker addresses", _wants(METADATA), metadata.plan_metadata),
    Stage("volume pause", _wants(METADATA), partitions_at_pause.plan_no_auto_creation),  # no topic auto-created
    Stage("broker addresses", _wants(FIND_COORDINATOR), addresses.plan_find_coordinator),
    Stage("broker addresses", _wants(DESCRIBE_CLUSTER), addresses.plan_describe_cluster),
    Stage("node endpoints", _wants(PRODUCE), addresses.plan_produce),
    Stage("node endpoints", _wants(FETCH), addresses.plan_fetch),
    Stage("node endpoints", _wants(SHARE_FETCH), addresses.plan_share_fetch),
    Stage("node endpoints", _wants(SHARE_ACKNOWLEDGE), addresses.plan_share_acknowledge),
    # the proxy's internal topics: refused to tenants first, so no quota counts what never reaches the broker
    Stage("internal-topic guard", GUARDED, internal_topics.plan_guard),
    Stage("internal exemption", _wants(PRODUCE), internal_topics.exempt_own_writes),  # may end the chain
    Stage("volume pause", _wants(PRODUCE), volume_pause.plan_pause),  # ends the chain while paused
    Stage("producer ids", _wants(PRODUCE), producer_ids.plan_produce),  # KIP-936; a refusal ends the chain
    Stage("byte rate", _wants(PRODUCE), byte_rate.plan_producer_byte_rate),  # KIP-13
    Stage("topic byte rate", _wants(PRODUCE), topic_rate.plan_produce),  # KIP-1010's proposal: per topic
    Stage("volume rate", _wants(PRODUCE), byte_rate.plan_volume_rate),  # the produce quota scaled
    Stage("byte rate", _wants(FETCH), byte_rate.plan_fetch),  # KIP-13, max_bytes capped
    Stage("topic byte rate", _wants(FETCH), topic_rate.plan_fetch),  # each topic's records trimmed to its headroom
    Stage("byte rate", _wants(SHARE_FETCH), byte_rate.plan_share_fetch),  # KIP-932: charged, max_bytes capped
    Stage("topic byte rate", _wants(SHARE_FETCH), topic_rate.plan_share_fetch),  # charged, never trimmed
    # a volume at PAUSE: no partition added (a refusal ends the chain: no mutation charged for it)
    Stage("volume pause", _wants(CREATE_TOPICS, CREATE_PARTITIONS), partitions_at_pause.plan_new_partitions),
    Stage(
        "volume pause", _wants(ALTER_PARTITION_REASSIGNMENTS), reassignments.plan_reassignments
    ),  # none onto a full one
    Stage("controller mutations", _wants(CREATE_TOPICS), mutations.plan_create_topics),  # KIP-599
    Stage("controller mutations", _wants(DELETE_TOPICS), mutations.plan_delete_topics),
    Stage("controller mutations", _wants(CREATE_PARTITIONS), mutations.plan_create_partitions),
    Stage("producer-id attribution", _wants(INIT_PRODUCER_ID), producer_ids.plan_init_producer_id),
    # what else makes the broker write (proxy.apis.broker_writes): capped, charged, bounded at PAUSE
    Stage("offset commits", _wants(OFFSET_COMMIT, TXN_OFFSET_COMMIT), offset_commits.plan_offset_commit),
    Stage("group records and transaction markers", broker_writes.WRITES, broker_writes.plan_write),
    Stage("transactional ids", _wants(INIT_PRODUCER_ID), transactional_ids.plan_init_producer_id),
    # KIP-599 on what a Streams topology makes the coordinator create (after PAUSE's bound: a refused one creates none)
    Stage("controller mutations", _wants(STREAMS_GROUP_HEARTBEAT), streams_topics.plan_streams_heartbeat),
    # served by the proxy with a dynamic config
    Stage("client quotas", _wants(DESCRIBE_CLIENT_QUOTAS), client_quotas.plan_describe),
    Stage("client quotas", _wants(ALTER_CLIENT_QUOTAS), client_quotas.plan_alter),
    # BROKER "": the proxy-wide settings
    Stage("broker configs", _wants(INCREMENTAL_ALTER_CONFIGS), broker_configs.plan_incremental_alter),
    Stage("broker configs", _wants(DESCRIBE_CONFIGS), broker_configs.plan_describe),
    # last: what an earlier stage settles at the header (refused, exempted) is not counted
    Stage("request rate", frozenset(COUNTABLE_APIS.values()), request_rate.plan_request_rate),
)
CHAINS = chains(STAGES)
# The chains of an API no request_rate quota counts now (scope.quotas.requests.counted: none while no entry sets one,
# whatever the dynamic config adds or removes): every stage but request rate's, which would add nothing. An API no
# other stage wants (ListOffsets, OffsetFetch, ...) stays on the pass-through path, as it was before request_rate.
UNCOUNTED_CHAINS = chains(stage for stage in STAGES if stage.plan is not request_rate.plan_request_rate)
# The APIs whose uncounted chain is planned once per connection while what its stages read stays the same (a
# consumer's Fetch: proxy.apis.reuse), each with what its stages read; checked to cover the chain's every stage.
REUSED_CHAINS = reusable(UNCOUNTED_CHAINS, REUSABLE)
# Of those, the APIs whose chain has stages asked for every request (they record at the header: a Produce's producer
# ids and bytes), with those stages: only the others' plans are reused.
ASKED_EACH_TIME = {api_key: frozenset(reuse.asks) for api_key, reuse in REUSABLE.items() if reuse.asks}


# What Kafka serves on a SASL listener before an authentication succeeds; anything else closes the connection.
BEFORE_AUTHENTICATION = frozenset((API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE))


def _planning(
    chains: dict[int, tuple[Stage, ...]], reuse: bool
) -> dict[int, tuple[tuple[Stage, ...], int, int, Inputs | None, frozenset[Planner] | None]]:
    """What :func:`plan_request` reads of an API with a chain in ``chains``, in one lookup: the chain, the lowest and
    highest version a broker speaks (the decoded range; every version for ApiVersions, whose answer says which), and,
    where its plan is reused (``reuse``), the chain's inputs and the stages asked for every request."""
    table = {}
    for api_key, chain in chains.items():
        versions = DECODED_APIS.get(api_key)
        low, high = (-(2**15), 2**15 - 1) if api_key == API_VERSIONS or versions is None else versions
        inputs = REUSED_CHAINS.get(api_key) if reuse else None
        table[api_key] = (chain, low, high, inputs, ASKED_EACH_TIME.get(api_key) if inputs is not None else None)
    return table


COUNTED_PLANNING = _planning(CHAINS, reuse=False)  # a counted API's plan is made for each request (it counts)
UNCOUNTED_PLANNING = _planning(UNCOUNTED_CHAINS, reuse=True)


def plan_request(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    if session.awaiting_authentication and header.api_key not in BEFORE_AUTHENTICATION:
        raise ProtocolError(
            f"{api_name(header.api_key)} before SASL authentication completed: only ApiVersions, "
            "SaslHandshake and SaslAuthenticate are served until the broker accepts one"
        )
    api_key = header.api_key
    planning = (COUNTED_PLANNING if api_key in scope.quotas.requests.counted else UNCOUNTED_PLANNING).get(api_key)
    if planning is None:
        return PASS
    chain, low, high, inputs, asks = planning
    if not low <= header.api_version <= high:
        # The client's error, not the broker's: no broker speaks this version (Kafka closes the connection too).
        raise ProtocolError(
            f"{api_name(api_key)} v{header.api_version} is not a version any Kafka broker speaks (v{low}-v{high})"
        )
    if inputs is not None:
        read = inputs(scope, session, header)
        if read is not None:
            if asks is None:
                return reused(chain, scope, session, header, read)
            return reused_asking(chain, asks, scope, session, header, read)
    return fold(chain, scope, session, header)


__all__ = [
    "BEFORE_AUTHENTICATION",
    "FORWARD_AS_IS",
    "CHAINS",
    "STAGES",
    "UNCOUNTED_CHAINS",
    "PASS",
    "REUSED_CHAINS",
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
