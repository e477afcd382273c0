"""Every Kafka API key: its name, the request versions peers may send, and when it became flexible.

The facts come from Kafka's message definitions (``clients/src/main/resources/common/message/*.json``):
the Kafka 4.x definitions for the newest versions, and Kafka 3.9's for the old versions that 4.0
removed (KIP-896) and for the ZooKeeper-era inter-broker APIs (keys 4-7) that 4.0 dropped, because
clients and brokers of 3.9 still send them through a proxy.

- :data:`VALID_VERSIONS` is the union range a Kafka 3.9 or 4.x peer may send.
- :data:`KAFKA4_VALID_VERSIONS` is the range Kafka 4.x itself defines (``None``: removed in 4.0).
- :data:`FLEXIBLE_SINCE` is the first flexible version (KIP-482), ``None`` if never flexible.

Header versions follow from flexibility, with two exceptions Kafka hard-codes: ControlledShutdown v0
uses request header v0 (no client id), and ApiVersions responses always use response header v0 so a
client can read the error even when the broker does not speak its version.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class _Api:
    key: int
    name: str
    valid_versions: tuple[int, int]
    kafka4_valid_versions: tuple[int, int] | None
    flexible_since: int | None


_APIS: tuple[_Api, ...] = (
    _Api(0, "Produce", (0, 13), (3, 13), 9),
    _Api(1, "Fetch", (0, 18), (4, 18), 12),
    _Api(2, "ListOffsets", (0, 11), (1, 11), 6),
    _Api(3, "Metadata", (0, 13), (0, 13), 9),
    _Api(4, "LeaderAndIsr", (0, 7), None, 4),
    _Api(5, "StopReplica", (0, 4), None, 2),
    _Api(6, "UpdateMetadata", (0, 8), None, 6),
    _Api(7, "ControlledShutdown", (0, 3), None, 3),
    _Api(8, "OffsetCommit", (0, 10), (2, 10), 8),
    _Api(9, "OffsetFetch", (0, 10), (1, 10), 6),
    _Api(10, "FindCoordinator", (0, 6), (0, 6), 3),
    _Api(11, "JoinGroup", (0, 9), (0, 9), 6),
    _Api(12, "Heartbeat", (0, 4), (0, 4), 4),
    _Api(13, "LeaveGroup", (0, 5), (0, 5), 4),
    _Api(14, "SyncGroup", (0, 5), (0, 5), 4),
    _Api(15, "DescribeGroups", (0, 6), (0, 6), 5),
    _Api(16, "ListGroups", (0, 5), (0, 5), 3),
    _Api(17, "SaslHandshake", (0, 1), (0, 1), None),
    _Api(18, "ApiVersions", (0, 4), (0, 4), 3),
    _Api(19, "CreateTopics", (0, 7), (2, 7), 5),
    _Api(20, "DeleteTopics", (0, 6), (1, 6), 4),
    _Api(21, "DeleteRecords", (0, 2), (0, 2), 2),
    _Api(22, "InitProducerId", (0, 6), (0, 6), 2),
    _Api(23, "OffsetForLeaderEpoch", (0, 4), (2, 4), 4),
    _Api(24, "AddPartitionsToTxn", (0, 5), (0, 5), 3),
    _Api(25, "AddOffsetsToTxn", (0, 4), (0, 4), 3),
    _Api(26, "EndTxn", (0, 5), (0, 5), 3),
    _Api(27, "WriteTxnMarkers", (0, 2), (1, 2), 1),
    _Api(28, "TxnOffsetCommit", (0, 5), (0, 5), 3),
    _Api(29, "DescribeAcls", (0, 3), (1, 3), 2),
    _Api(30, "CreateAcls", (0, 3), (1, 3), 2),
    _Api(31, "DeleteAcls", (0, 3), (1, 3), 2),
    _Api(32, "DescribeConfigs", (0, 4), (1, 4), 4),
    _Api(33, "AlterConfigs", (0, 2), (0, 2), 2),
    _Api(34, "AlterReplicaLogDirs", (0, 2), (1, 2), 2),
    _Api(35, "DescribeLogDirs", (0, 5), (1, 5), 2),
    _Api(36, "SaslAuthenticate", (0, 2), (0, 2), 2),
    _Api(37, "CreatePartitions", (0, 3), (0, 3), 2),
    _Api(38, "CreateDelegationToken", (0, 3), (1, 3), 2),
    _Api(39, "RenewDelegationToken", (0, 2), (1, 2), 2),
    _Api(40, "ExpireDelegationToken", (0, 2), (1, 2), 2),
    _Api(41, "DescribeDelegationToken", (0, 3), (1, 3), 2),
    _Api(42, "DeleteGroups", (0, 2), (0, 2), 2),
    _Api(43, "ElectLeaders", (0, 2), (0, 2), 2),
    _Api(44, "IncrementalAlterConfigs", (0, 1), (0, 1), 1),
    _Api(45, "AlterPartitionReassignments", (0, 1), (0, 1), 0),
    _Api(46, "ListPartitionReassignments", (0, 0), (0, 0), 0),
    _Api(47, "OffsetDelete", (0, 0), (0, 0), None),
    _Api(48, "DescribeClientQuotas", (0, 1), (0, 1), 1),
    _Api(49, "AlterClientQuotas", (0, 1), (0, 1), 1),
    _Api(50, "DescribeUserScramCredentials", (0, 0), (0, 0), 0),
    _Api(51, "AlterUserScramCredentials", (0, 0), (0, 0), 0),
    _Api(52, "Vote", (0, 2), (0, 2), 0),
    _Api(53, "BeginQuorumEpoch", (0, 1), (0, 1), 1),
    _Api(54, "EndQuorumEpoch", (0, 1), (0, 1), 1),
    _Api(55, "DescribeQuorum", (0, 2), (0, 2), 0),
    _Api(56, "AlterPartition", (0, 3), (2, 3), 0),
    _Api(57, "UpdateFeatures", (0, 2), (0, 2), 0),
    _Api(58, "Envelope", (0, 0), (0, 0), 0),
    _Api(59, "FetchSnapshot", (0, 1), (0, 1), 0),
    _Api(60, "DescribeCluster", (0, 2), (0, 2), 0),
    _Api(61, "DescribeProducers", (0, 0), (0, 0), 0),
    _Api(62, "BrokerRegistration", (0, 4), (0, 4), 0),
    _Api(63, "BrokerHeartbeat", (0, 2), (0, 2), 0),
    _Api(64, "UnregisterBroker", (0, 0), (0, 0), 0),
    _Api(65, "DescribeTransactions", (0, 0), (0, 0), 0),
    _Api(66, "ListTransactions", (0, 2), (0, 2), 0),
    _Api(67, "AllocateProducerIds", (0, 0), (0, 0), 0),
    _Api(68, "ConsumerGroupHeartbeat", (0, 1), (0, 1), 0),
    _Api(69, "ConsumerGroupDescribe", (0, 1), (0, 1), 0),
    _Api(70, "ControllerRegistration", (0, 0), (0, 0), 0),
    _Api(71, "GetTelemetrySubscriptions", (0, 0), (0, 0), 0),
    _Api(72, "PushTelemetry", (0, 0), (0, 0), 0),
    _Api(73, "AssignReplicasToDirs", (0, 0), (0, 0), 0),
    _Api(74, "ListConfigResources", (0, 1), (0, 1), 0),
    _Api(75, "DescribeTopicPartitions", (0, 0), (0, 0), 0),
    _Api(76, "ShareGroupHeartbeat", (0, 1), (1, 1), 0),
    _Api(77, "ShareGroupDescribe", (0, 1), (1, 1), 0),
    _Api(78, "ShareFetch", (0, 2), (1, 2), 0),
    _Api(79, "ShareAcknowledge", (0, 2), (1, 2), 0),
    _Api(80, "AddRaftVoter", (0, 1), (0, 1), 0),
    _Api(81, "RemoveRaftVoter", (0, 0), (0, 0), 0),
    _Api(82, "UpdateRaftVoter", (0, 0), (0, 0), 0),
    _Api(83, "InitializeShareGroupState", (0, 0), (0, 0), 0),
    _Api(84, "ReadShareGroupState", (0, 0), (0, 0), 0),
    _Api(85, "WriteShareGroupState", (0, 1), (0, 1), 0),
    _Api(86, "DeleteShareGroupState", (0, 0), (0, 0), 0),
    _Api(87, "ReadShareGroupStateSummary", (0, 1), (0, 1), 0),
    _Api(88, "StreamsGroupHeartbeat", (0, 1), (0, 1), 0),
    _Api(89, "StreamsGroupDescribe", (0, 0), (0, 0), 0),
    _Api(90, "DescribeShareGroupOffsets", (0, 1), (0, 1), 0),
    _Api(91, "AlterShareGroupOffsets", (0, 0), (0, 0), 0),
    _Api(92, "DeleteShareGroupOffsets", (0, 0), (0, 0), 0),
)

API_NAMES: dict[int, str] = {a.key: a.name for a in _APIS}
API_KEYS: dict[str, int] = {a.name: a.key for a in _APIS}
VALID_VERSIONS: dict[int, tuple[int, int]] = {a.key: a.valid_versions for a in _APIS}
KAFKA4_VALID_VERSIONS: dict[int, tuple[int, int] | None] = {a.key: a.kafka4_valid_versions for a in _APIS}
FLEXIBLE_SINCE: dict[int, int | None] = {a.key: a.flexible_since for a in _APIS}

PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
CONTROLLED_SHUTDOWN = 7
OFFSET_COMMIT = 8
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
SASL_HANDSHAKE = 17
API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_TOPICS = 20
DELETE_RECORDS = 21
INIT_PRODUCER_ID = 22
ADD_PARTITIONS_TO_TXN = 24
WRITE_TXN_MARKERS = 27
TXN_OFFSET_COMMIT = 28
DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
DESCRIBE_LOG_DIRS = 35
SASL_AUTHENTICATE = 36
CREATE_PARTITIONS = 37
DESCRIBE_DELEGATION_TOKEN = 41
DELETE_GROUPS = 42
INCREMENTAL_ALTER_CONFIGS = 44
ALTER_PARTITION_REASSIGNMENTS = 45
OFFSET_DELETE = 47
DESCRIBE_CLIENT_QUOTAS = 48
ALTER_CLIENT_QUOTAS = 49
DESCRIBE_CLUSTER = 60
DESCRIBE_TRANSACTIONS = 65
CONSUMER_GROUP_HEARTBEAT = 68
SHARE_GROUP_HEARTBEAT = 76
SHARE_FETCH = 78
SHARE_ACKNOWLEDGE = 79
STREAMS_GROUP_HEARTBEAT = 88
ALTER_SHARE_GROUP_OFFSETS = 91
DELETE_SHARE_GROUP_OFFSETS = 92


def api_name(key: int) -> str:
    """Kafka's CamelCase name for ``key`` (``"Produce"``), or ``"Unknown<key>"``."""
    return API_NAMES.get(key, f"Unknown{key}")


def is_valid_version(key: int, version: int) -> bool:
    """True if a Kafka 3.9 or 4.x peer may send ``version`` of API ``key``."""
    rng = VALID_VERSIONS.get(key)
    return rng is not None and rng[0] <= version <= rng[1]


def is_flexible(key: int, version: int) -> bool:
    """True if ``version`` of API ``key`` uses the flexible (compact, tagged-field) encoding."""
    since = FLEXIBLE_SINCE.get(key)
    return since is not None and version >= since


def request_header_version(key: int, version: int) -> int:
    """The request header version: 2 if flexible, else 1; ControlledShutdown v0 uses v0."""
    if key == CONTROLLED_SHUTDOWN and version == 0:
        return 0
    return 2 if is_flexible(key, version) else 1


def response_header_version(key: int, version: int) -> int:
    """The response header version: 1 if flexible, else 0; ApiVersions always uses 0."""
    if key == API_VERSIONS:
        return 0
    return 1 if is_flexible(key, version) else 0


# -- Per-API facts for the APIs the proxy decodes ---------------------------------------------------------------
# throttle_time_ms: the first response version with the field (the "ThrottleTimeMs" versions of *Response.json).
# KIP-219: the first version whose client waits throttle_time_ms itself (Kafka's
#   AbstractResponse.shouldClientThrottle, overridden per *Response.java; the default is false). Only the client's
#   own back-off depends on it: the broker (and the proxy) answer every version at once and mute the connection.
# KIP-599: the first version that is rejected with THROTTLING_QUOTA_EXCEEDED when over the controller mutation
#   quota (strict; ControllerApis' newQuotaFor(request, strictSinceVersion)); before it, the mutation is accepted
#   and the client throttled afterwards (permissive).
# None: never (no such field, the client never throttles itself, not a controller mutation).


@dataclass(frozen=True, slots=True)
class _DecodedApi:
    key: int
    throttle_time_since: int | None
    client_throttles_since: int | None
    strict_mutation_since: int | None


_DECODED: tuple[_DecodedApi, ...] = (
    #           key                     throttle_time_ms  KIP-219  KIP-599
    _DecodedApi(PRODUCE, 1, 6, None),
    _DecodedApi(FETCH, 1, 8, None),
    _DecodedApi(METADATA, 3, 6, None),
    _DecodedApi(OFFSET_COMMIT, 3, 4, None),
    _DecodedApi(FIND_COORDINATOR, 1, 2, None),
    _DecodedApi(JOIN_GROUP, 2, 3, None),
    _DecodedApi(SYNC_GROUP, 1, 2, None),
    _DecodedApi(SASL_HANDSHAKE, None, None, None),
    _DecodedApi(API_VERSIONS, 1, 2, None),
    _DecodedApi(CREATE_TOPICS, 2, 3, 6),
    _DecodedApi(DELETE_TOPICS, 1, 2, 5),
    _DecodedApi(DELETE_RECORDS, 0, 1, None),
    _DecodedApi(INIT_PRODUCER_ID, 0, 1, None),
    _DecodedApi(ADD_PARTITIONS_TO_TXN, 0, 1, None),
    _DecodedApi(WRITE_TXN_MARKERS, None, None, None),
    _DecodedApi(TXN_OFFSET_COMMIT, 0, 1, None),
    _DecodedApi(DESCRIBE_CONFIGS, 0, 2, None),
    _DecodedApi(ALTER_CONFIGS, 0, 1, None),
    _DecodedApi(SASL_AUTHENTICATE, None, None, None),
    _DecodedApi(CREATE_PARTITIONS, 0, 1, 3),
    _DecodedApi(INCREMENTAL_ALTER_CONFIGS, 0, 0, None),
    _DecodedApi(OFFSET_DELETE, 0, 0, None),
    _DecodedApi(ALTER_PARTITION_REASSIGNMENTS, 0, None, None),
    _DecodedApi(DESCRIBE_CLIENT_QUOTAS, 0, None, None),
    _DecodedApi(ALTER_CLIENT_QUOTAS, 0, None, None),
    _DecodedApi(DESCRIBE_CLUSTER, 0, None, None),
    _DecodedApi(CONSUMER_GROUP_HEARTBEAT, 0, None, None),
    _DecodedApi(SHARE_GROUP_HEARTBEAT, 0, None, None),  # v0: Kafka 4.0's early access of KIP-932, v1: 4.1+
    _DecodedApi(SHARE_FETCH, 0, None, None),
    _DecodedApi(SHARE_ACKNOWLEDGE, 0, None, None),
    _DecodedApi(STREAMS_GROUP_HEARTBEAT, 0, None, None),
    _DecodedApi(ALTER_SHARE_GROUP_OFFSETS, 0, None, None),
    _DecodedApi(DELETE_SHARE_GROUP_OFFSETS, 0, None, None),
)

THROTTLE_TIME_SINCE: dict[int, int | None] = {a.key: a.throttle_time_since for a in _DECODED}
CLIENT_THROTTLES_SINCE: dict[int, int | None] = {a.key: a.client_throttles_since for a in _DECODED}
STRICT_MUTATION_SINCE: dict[int, int | None] = {a.key: a.strict_mutation_since for a in _DECODED}


def _since(table: dict[int, int | None], key: int, version: int) -> bool:
    since = table.get(key)
    return since is not None and version >= since


def has_throttle_time(api_key: int, version: int) -> bool:
    """True if the response to ``version`` of ``api_key`` carries ``throttle_time_ms`` (decoded APIs only)."""
    return _since(THROTTLE_TIME_SINCE, api_key, version)


def client_throttles(api_key: int, version: int) -> bool:
    """KIP-219: the client of this version honours ``throttle_time_ms`` itself (it backs off before sending more)."""
    return _since(CLIENT_THROTTLES_SINCE, api_key, version)


def strict_mutation_quota(api_key: int, version: int) -> bool:
    """KIP-599: this version of a controller mutation is rejected with THROTTLING_QUOTA_EXCEEDED when over quota."""
    return _since(STRICT_MUTATION_SINCE, api_key, version)


# -- First versions with a field the proxy reads or writes (the field's "versions" in Kafka's message JSON) --------
FETCH_MAX_BYTES_SINCE = 3  # FetchRequest MaxBytes (KIP-74): a Fetch that can be capped
FETCH_REPLICA_STATE_SINCE = 15  # FetchRequest ReplicaState (KIP-903): the follower's ReplicaId moves from the body's
#                                first field (v0-14) into tagged field 1 (ReplicaId int32, ReplicaEpoch int64)
FETCH_TOPIC_IDS_SINCE = 13  # FetchRequest/Response TopicId instead of the topic's name (KIP-516)
FIND_COORDINATOR_BATCHED_SINCE = 4  # FindCoordinatorResponse Coordinators (KIP-699): one entry per key
CREATE_TOPICS_REPORTS_PARTITIONS_SINCE = 5  # CreateTopicsResponse NumPartitions
PRODUCE_NODE_ENDPOINTS_SINCE = 10  # ProduceResponse NodeEndpoints (KIP-951)
FETCH_NODE_ENDPOINTS_SINCE = 16  # FetchResponse NodeEndpoints (KIP-951)
SHARE_NODE_ENDPOINTS_SINCE = 0  # ShareFetchResponse and ShareAcknowledgeResponse NodeEndpoints (KIP-932), not tagged
METADATA_AUTO_CREATE_SINCE = 4  # MetadataRequest AllowAutoTopicCreation (KIP-204): before, a broker with
#                                 auto.create.topics.enable creates every unknown topic named
METADATA_TOPIC_IDS_SINCE = 10  # MetadataRequest/Response TopicId (KIP-516; Kafka 2.8+, every 3.x and 4.x broker)
# MetadataRequest by TopicId, name null: served from v12 (KAFKA-10774, Kafka 3.1). v10 and v11 carry the field, but a
# broker answers INVALID_REQUEST for every topic of such a request (MetadataRequest.json: "Versions 10 and 11 should
# not use the topicId field or set topic name to null"; KafkaApis.handleTopicMetadataRequest)
METADATA_LOOKUP_BY_ID_SINCE = 12
DESCRIBE_LOG_DIRS_TOTAL_BYTES_SINCE = 4  # DescribeLogDirsResponse TotalBytes and UsableBytes (KIP-827, Kafka 3.3)
DESCRIBE_DELEGATION_TOKEN_REQUESTER_SINCE = 3  # DescribeDelegationTokenResponse TokenRequester* (KIP-373, Kafka 3.3)

# -- The versions the proxy's own requests to a broker are sent in --------------------------------------------------
OWN_METADATA_VERSION = METADATA_TOPIC_IDS_SINCE  # topic ids in the answer; every broker since 2.8 (all 3.x and 4.x)
OWN_METADATA_BY_ID_VERSION = METADATA_LOOKUP_BY_ID_SINCE  # names for topic ids, where the broker lists it (3.1+)
OWN_DESCRIBE_LOG_DIRS_VERSION = DESCRIBE_LOG_DIRS_TOTAL_BYTES_SINCE  # the sizes of each log dir; Kafka 3.3+
# A token's owner (PrincipalName, every version) and who asked for it; Kafka 3.3+ (4.x serves v1-v3)
OWN_DESCRIBE_DELEGATION_TOKEN_VERSION = DESCRIBE_DELEGATION_TOKEN_REQUESTER_SINCE
