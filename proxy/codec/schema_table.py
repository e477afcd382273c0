"""Kafka protocol message schemas for the APIs the proxy decodes. GENERATED, do not edit.

Made by ``tools/gen_schema.py`` from Kafka's message definitions (4.x, widened with 3.9's removed
versions). Key: ``(api_key, "request" | "response")``; value: segments of
``{"name", "valid": (lo, hi), "flexible": first_flexible_or_None, "fields": FIELDS}``.
A field is ``(name, kind, versions, nullable_versions, tag, tagged_versions, default, ignorable,
children, struct_name)``; version ranges are ``(lo, hi)`` with hi=0x7FFF for "and later".
"""

# fmt: off
SCHEMAS = {
    (0, 'request'): (
        {"name": 'ProduceRequest', "valid": (0, 13), "flexible": 9, "fields": (
            ('transactional_id', 'string', (3, 32767), (3, 32767), None, None, None, False, None, None),
            ('acks', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ('timeout_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('topic_data', '[]struct', (0, 32767), None, None, None, (), False, (
                ('name', 'string', (0, 12), None, None, None, '', True, None, None),
                ('topic_id', 'uuid', (13, 32767), None, None, None, None, True, None, None),
                ('partition_data', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('records', 'records', (0, 32767), (0, 32767), None, None, None, False, None, None),
                ), 'PartitionProduceData'),
            ), 'TopicProduceData'),
        )},
    ),
    (0, 'response'): (
        {"name": 'ProduceResponse', "valid": (0, 13), "flexible": 9, "fields": (
            ('responses', '[]struct', (0, 32767), None, None, None, (), False, (
                ('name', 'string', (0, 12), None, None, None, '', True, None, None),
                ('topic_id', 'uuid', (13, 32767), None, None, None, None, True, None, None),
                ('partition_responses', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                    ('base_offset', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                    ('log_append_time_ms', 'int64', (2, 32767), None, None, None, -1, True, None, None),
                    ('log_start_offset', 'int64', (5, 32767), None, None, None, -1, True, None, None),
                    ('record_errors', '[]struct', (8, 32767), None, None, None, (), True, (
                        ('batch_index', 'int32', (8, 32767), None, None, None, 0, False, None, None),
                        ('batch_index_error_message', 'string', (8, 32767), (8, 32767), None, None, None, False, None, None),
                    ), 'BatchIndexAndErrorMessage'),
                    ('error_message', 'string', (8, 32767), (8, 32767), None, None, None, True, None, None),
                    ('current_leader', 'struct', (10, 32767), None, 0, (10, 32767), None, False, (
                        ('leader_id', 'int32', (10, 32767), None, None, None, -1, False, None, None),
                        ('leader_epoch', 'int32', (10, 32767), None, None, None, -1, False, None, None),
                    ), 'LeaderIdAndEpoch'),
                ), 'PartitionProduceResponse'),
            ), 'TopicProduceResponse'),
            ('throttle_time_ms', 'int32', (1, 32767), None, None, None, 0, True, None, None),
            ('node_endpoints', '[]struct', (10, 32767), None, 0, (10, 32767), (), False, (
                ('node_id', 'int32', (10, 32767), None, None, None, 0, False, None, None),
                ('host', 'string', (10, 32767), None, None, None, '', False, None, None),
                ('port', 'int32', (10, 32767), None, None, None, 0, False, None, None),
                ('rack', 'string', (10, 32767), (10, 32767), None, None, None, False, None, None),
            ), 'NodeEndpoint'),
        )},
    ),
    (1, 'request'): (
        {"name": 'FetchRequest', "valid": (0, 18), "flexible": 12, "fields": (
            ('cluster_id', 'string', (12, 32767), (12, 32767), 0, (12, 32767), None, True, None, None),
            ('replica_id', 'int32', (0, 14), None, None, None, -1, False, None, None),
            ('replica_state', 'struct', (15, 32767), None, 1, (15, 32767), None, False, (
                ('replica_id', 'int32', (15, 32767), None, None, None, -1, False, None, None),
                ('replica_epoch', 'int64', (15, 32767), None, None, None, -1, False, None, None),
            ), 'ReplicaState'),
            ('max_wait_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('min_bytes', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('max_bytes', 'int32', (3, 32767), None, None, None, 2147483647, True, None, None),
            ('isolation_level', 'int8', (4, 32767), None, None, None, 0, True, None, None),
            ('session_id', 'int32', (7, 32767), None, None, None, 0, True, None, None),
            ('session_epoch', 'int32', (7, 32767), None, None, None, -1, True, None, None),
            ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                ('topic', 'string', (0, 12), None, None, None, '', True, None, None),
                ('topic_id', 'uuid', (13, 32767), None, None, None, None, True, None, None),
                ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('partition', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('current_leader_epoch', 'int32', (9, 32767), None, None, None, -1, True, None, None),
                    ('fetch_offset', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                    ('last_fetched_epoch', 'int32', (12, 32767), None, None, None, -1, False, None, None),
                    ('log_start_offset', 'int64', (5, 32767), None, None, None, -1, True, None, None),
                    ('partition_max_bytes', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('replica_directory_id', 'uuid', (17, 32767), None, 0, (17, 32767), None, True, None, None),
                    ('high_watermark', 'int64', (18, 32767), None, 1, (18, 32767), 9223372036854775807, True, None, None),
                ), 'FetchPartition'),
            ), 'FetchTopic'),
            ('forgotten_topics_data', '[]struct', (7, 32767), None, None, None, (), False, (
                ('topic', 'string', (7, 12), None, None, None, '', True, None, None),
                ('topic_id', 'uuid', (13, 32767), None, None, None, None, True, None, None),
                ('partitions', '[]int32', (7, 32767), None, None, None, (), False, None, None),
            ), 'ForgottenTopic'),
            ('rack_id', 'string', (11, 32767), None, None, None, '', True, None, None),
        )},
    ),
    (1, 'response'): (
        {"name": 'FetchResponse', "valid": (0, 18), "flexible": 12, "fields": (
            ('throttle_time_ms', 'int32', (1, 32767), None, None, None, 0, True, None, None),
            ('error_code', 'int16', (7, 32767), None, None, None, 0, True, None, None),
            ('session_id', 'int32', (7, 32767), None, None, None, 0, False, None, None),
            ('responses', '[]struct', (0, 32767), None, None, None, (), False, (
                ('topic', 'string', (0, 12), None, None, None, '', True, None, None),
                ('topic_id', 'uuid', (13, 32767), None, None, None, None, True, None, None),
                ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                    ('high_watermark', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                    ('last_stable_offset', 'int64', (4, 32767), None, None, None, -1, True, None, None),
                    ('log_start_offset', 'int64', (5, 32767), None, None, None, -1, True, None, None),
                    ('diverging_epoch', 'struct', (12, 32767), None, 0, (12, 32767), None, False, (
                        ('epoch', 'int32', (12, 32767), None, None, None, -1, False, None, None),
                        ('end_offset', 'int64', (12, 32767), None, None, None, -1, False, None, None),
                    ), 'EpochEndOffset'),
                    ('current_leader', 'struct', (12, 32767), None, 1, (12, 32767), None, False, (
                        ('leader_id', 'int32', (12, 32767), None, None, None, -1, False, None, None),
                        ('leader_epoch', 'int32', (12, 32767), None, None, None, -1, False, None, None),
                    ), 'LeaderIdAndEpoch'),
                    ('snapshot_id', 'struct', (12, 32767), None, 2, (12, 32767), None, False, (
                        ('end_offset', 'int64', (0, 32767), None, None, None, -1, False, None, None),
                        ('epoch', 'int32', (0, 32767), None, None, None, -1, False, None, None),
                    ), 'SnapshotId'),
                    ('aborted_transactions', '[]struct', (4, 32767), (4, 32767), None, None, (), True, (
                        ('producer_id', 'int64', (4, 32767), None, None, None, 0, False, None, None),
                        ('first_offset', 'int64', (4, 32767), None, None, None, 0, False, None, None),
                    ), 'AbortedTransaction'),
                    ('preferred_read_replica', 'int32', (11, 32767), None, None, None, -1, False, None, None),
                    ('records', 'records', (0, 32767), (0, 32767), None, None, None, False, None, None),
                ), 'PartitionData'),
            ), 'FetchableTopicResponse'),
            ('node_endpoints', '[]struct', (16, 32767), None, 0, (16, 32767), (), False, (
                ('node_id', 'int32', (16, 32767), None, None, None, 0, False, None, None),
                ('host', 'string', (16, 32767), None, None, None, '', False, None, None),
                ('port', 'int32', (16, 32767), None, None, None, 0, False, None, None),
                ('rack', 'string', (16, 32767), (16, 32767), None, None, None, False, None, None),
            ), 'NodeEndpoint'),
        )},
    ),
    (3, 'request'): (
        {"name": 'MetadataRequest', "valid": (0, 13), "flexible": 9, "fields": (
            ('topics', '[]struct', (0, 32767), (1, 32767), None, None, (), False, (
                ('topic_id', 'uuid', (10, 32767), None, None, None, None, True, None, None),
                ('name', 'string', (0, 32767), (10, 32767), None, None, '', False, None, None),
            ), 'MetadataRequestTopic'),
            ('allow_auto_topic_creation', 'bool', (4, 32767), None, None, None, True, False, None, None),
            ('include_cluster_authorized_operations', 'bool', (8, 10), None, None, None, False, False, None, None),
            ('include_topic_authorized_operations', 'bool', (8, 32767), None, None, None, False, False, None, None),
        )},
    ),
    (3, 'response'): (
        {"name": 'MetadataResponse', "valid": (0, 13), "flexible": 9, "fields": (
            ('throttle_time_ms', 'int32', (3, 32767), None, None, None, 0, True, None, None),
            ('brokers', '[]struct', (0, 32767), None, None, None, (), False, (
                ('node_id', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                ('host', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('port', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                ('rack', 'string', (1, 32767), (1, 32767), None, None, None, True, None, None),
            ), 'MetadataResponseBroker'),
            ('cluster_id', 'string', (2, 32767), (2, 32767), None, None, None, True, None, None),
            ('controller_id', 'int32', (1, 32767), None, None, None, -1, True, None, None),
            ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                ('name', 'string', (0, 32767), (12, 32767), None, None, '', False, None, None),
                ('topic_id', 'uuid', (10, 32767), None, None, None, None, True, None, None),
                ('is_internal', 'bool', (1, 32767), None, None, None, False, True, None, None),
                ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                    ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('leader_id', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('leader_epoch', 'int32', (7, 32767), None, None, None, -1, True, None, None),
                    ('replica_nodes', '[]int32', (0, 32767), None, None, None, (), False, None, None),
                    ('isr_nodes', '[]int32', (0, 32767), None, None, None, (), False, None, None),
                    ('offline_replicas', '[]int32', (5, 32767), None, None, None, (), True, None, None),
                ), 'MetadataResponsePartition'),
                ('topic_authorized_operations', 'int32', (8, 32767), None, None, None, -2147483648, False, None, None),
            ), 'MetadataResponseTopic'),
            ('cluster_authorized_operations', 'int32', (8, 10), None, None, None, -2147483648, False, None, None),
            ('error_code', 'int16', (13, 32767), None, None, None, 0, True, None, None),
        )},
    ),
    (8, 'request'): (
        {"name": 'OffsetCommitRequest', "valid": (0, 10), "flexible": 8, "fields": (
            ('group_id', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('generation_id_or_member_epoch', 'int32', (1, 32767), None, None, None, -1, True, None, None),
            ('member_id', 'string', (1, 32767), None, None, None, '', True, None, None),
            ('group_instance_id', 'string', (7, 32767), (7, 32767), None, None, None, False, None, None),
            ('retention_time_ms', 'int64', (2, 4), None, None, None, -1, True, None, None),
            ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                ('name', 'string', (0, 9), None, None, None, '', True, None, None),
                ('topic_id', 'uuid', (10, 32767), None, None, None, None, True, None, None),
                ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('committed_offset', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                    ('committed_leader_epoch', 'int32', (6, 32767), None, None, None, -1, True, None, None),
                    ('committed_metadata', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
                ), 'OffsetCommitRequestPartition'),
            ), 'OffsetCommitRequestTopic'),
        )},
        {"name": 'OffsetCommitRequest', "valid": (1, 1), "flexible": 8, "fields": (
            ('group_id', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('generation_id', 'int32', (1, 32767), None, None, None, -1, True, None, None),
            ('member_id', 'string', (1, 32767), None, None, None, '', True, None, None),
            ('group_instance_id', 'string', (7, 32767), (7, 32767), None, None, None, False, None, None),
            ('retention_time_ms', 'int64', (2, 4), None, None, None, -1, True, None, None),
            ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                ('name', 'string', (0, 32767), (9, 32767), None, None, '', False, None, None),
                ('topic_id', 'uuid', (9, 32767), None, None, None, None, False, None, None),
                ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('committed_offset', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                    ('committed_leader_epoch', 'int32', (6, 32767), None, None, None, -1, True, None, None),
                    ('commit_timestamp', 'int64', (1, 1), None, None, None, -1, False, None, None),
                    ('committed_metadata', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
                ), 'OffsetCommitRequestPartition'),
            ), 'OffsetCommitRequestTopic'),
        )},
    ),
    (8, 'response'): (
        {"name": 'OffsetCommitResponse', "valid": (0, 10), "flexible": 8, "fields": (
            ('throttle_time_ms', 'int32', (3, 32767), None, None, None, 0, True, None, None),
            ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                ('name', 'string', (0, 9), None, None, None, '', True, None, None),
                ('topic_id', 'uuid', (10, 32767), None, None, None, None, True, None, None),
                ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                ), 'OffsetCommitResponsePartition'),
            ), 'OffsetCommitResponseTopic'),
        )},
    ),
    (10, 'request'): (
        {"name": 'FindCoordinatorRequest', "valid": (0, 6), "flexible": 3, "fields": (
            ('key', 'string', (0, 3), None, None, None, '', False, None, None),
            ('key_type', 'int8', (1, 32767), None, None, None, 0, False, None, None),
            ('coordinator_keys', '[]string', (4, 32767), None, None, None, (), False, None, None),
        )},
    ),
    (10, 'response'): (
        {"name": 'FindCoordinatorResponse', "valid": (0, 6), "flexible": 3, "fields": (
            ('throttle_time_ms', 'int32', (1, 32767), None, None, None, 0, True, None, None),
            ('error_code', 'int16', (0, 3), None, None, None, 0, False, None, None),
            ('error_message', 'string', (1, 3), (1, 3), None, None, '', True, None, None),
            ('node_id', 'int32', (0, 3), None, None, None, 0, False, None, None),
            ('host', 'string', (0, 3), None, None, None, '', False, None, None),
            ('port', 'int32', (0, 3), None, None, None, 0, False, None, None),
            ('coordinators', '[]struct', (4, 32767), None, None, None, (), False, (
                ('key', 'string', (4, 32767), None, None, None, '', False, None, None),
                ('node_id', 'int32', (4, 32767), None, None, None, 0, False, None, None),
                ('host', 'string', (4, 32767), None, None, None, '', False, None, None),
                ('port', 'int32', (4, 32767), None, None, None, 0, False, None, None),
                ('error_code', 'int16', (4, 32767), None, None, None, 0, False, None, None),
                ('error_message', 'string', (4, 32767), (4, 32767), None, None, '', True, None, None),
            ), 'Coordinator'),
        )},
    ),
    (11, 'request'): (
        {"name": 'JoinGroupRequest', "valid": (0, 9), "flexible": 6, "fields": (
            ('group_id', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('session_timeout_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('rebalance_timeout_ms', 'int32', (1, 32767), None, None, None, -1, True, None, None),
            ('member_id', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('group_instance_id', 'string', (5, 32767), (5, 32767), None, None, None, False, None, None),
            ('protocol_type', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('protocols', '[]struct', (0, 32767), None, None, None, (), False, (
                ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('metadata', 'bytes', (0, 32767), None, None, None, b'', False, None, None),
            ), 'JoinGroupRequestProtocol'),
            ('reason', 'string', (8, 32767), (8, 32767), None, None, None, True, None, None),
        )},
    ),
    (11, 'response'): (
        {"name": 'JoinGroupResponse', "valid": (0, 9), "flexible": 6, "fields": (
            ('throttle_time_ms', 'int32', (2, 32767), None, None, None, 0, True, None, None),
            ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ('generation_id', 'int32', (0, 32767), None, None, None, -1, False, None, None),
            ('protocol_type', 'string', (7, 32767), (7, 32767), None, None, None, True, None, None),
            ('protocol_name', 'string', (0, 32767), (7, 32767), None, None, '', False, None, None),
            ('leader', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('skip_assignment', 'bool', (9, 32767), None, None, None, False, False, None, None),
            ('member_id', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('members', '[]struct', (0, 32767), None, None, None, (), False, (
                ('member_id', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('group_instance_id', 'string', (5, 32767), (5, 32767), None, None, None, True, None, None),
                ('metadata', 'bytes', (0, 32767), None, None, None, b'', False, None, None),
            ), 'JoinGroupResponseMember'),
        )},
    ),
    (14, 'request'): (
        {"name": 'SyncGroupRequest', "valid": (0, 5), "flexible": 4, "fields": (
            ('group_id', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('generation_id', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('member_id', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('group_instance_id', 'string', (3, 32767), (3, 32767), None, None, None, False, None, None),
            ('protocol_type', 'string', (5, 32767), (5, 32767), None, None, None, True, None, None),
            ('protocol_name', 'string', (5, 32767), (5, 32767), None, None, None, True, None, None),
            ('assignments', '[]struct', (0, 32767), None, None, None, (), False, (
                ('member_id', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('assignment', 'bytes', (0, 32767), None, None, None, b'', False, None, None),
            ), 'SyncGroupRequestAssignment'),
        )},
    ),
    (14, 'response'): (
        {"name": 'SyncGroupResponse', "valid": (0, 5), "flexible": 4, "fields": (
            ('throttle_time_ms', 'int32', (1, 32767), None, None, None, 0, True, None, None),
            ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ('protocol_type', 'string', (5, 32767), (5, 32767), None, None, None, True, None, None),
            ('protocol_name', 'string', (5, 32767), (5, 32767), None, None, None, True, None, None),
            ('assignment', 'bytes', (0, 32767), None, None, None, b'', False, None, None),
        )},
    ),
    (17, 'request'): (
        {"name": 'SaslHandshakeRequest', "valid": (0, 1), "flexible": None, "fields": (
            ('mechanism', 'string', (0, 32767), None, None, None, '', False, None, None),
        )},
    ),
    (17, 'response'): (
        {"name": 'SaslHandshakeResponse', "valid": (0, 1), "flexible": None, "fields": (
            ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ('mechanisms', '[]string', (0, 32767), None, None, None, (), False, None, None),
        )},
    ),
    (18, 'request'): (
        {"name": 'ApiVersionsRequest', "valid": (0, 4), "flexible": 3, "fields": (
            ('client_software_name', 'string', (3, 32767), None, None, None, '', True, None, None),
            ('client_software_version', 'string', (3, 32767), None, None, None, '', True, None, None),
        )},
    ),
    (18, 'response'): (
        {"name": 'ApiVersionsResponse', "valid": (0, 4), "flexible": 3, "fields": (
            ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ('api_keys', '[]struct', (0, 32767), None, None, None, (), False, (
                ('api_key', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                ('min_version', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                ('max_version', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ), 'ApiVersion'),
            ('throttle_time_ms', 'int32', (1, 32767), None, None, None, 0, True, None, None),
            ('supported_features', '[]struct', (3, 32767), None, 0, (3, 32767), (), True, (
                ('name', 'string', (3, 32767), None, None, None, '', False, None, None),
                ('min_version', 'int16', (3, 32767), None, None, None, 0, False, None, None),
                ('max_version', 'int16', (3, 32767), None, None, None, 0, False, None, None),
            ), 'SupportedFeatureKey'),
            ('finalized_features_epoch', 'int64', (3, 32767), None, 1, (3, 32767), -1, True, None, None),
            ('finalized_features', '[]struct', (3, 32767), None, 2, (3, 32767), (), True, (
                ('name', 'string', (3, 32767), None, None, None, '', False, None, None),
                ('max_version_level', 'int16', (3, 32767), None, None, None, 0, False, None, None),
                ('min_version_level', 'int16', (3, 32767), None, None, None, 0, False, None, None),
            ), 'FinalizedFeatureKey'),
            ('zk_migration_ready', 'bool', (3, 32767), None, 3, (3, 32767), False, True, None, None),
        )},
    ),
    (19, 'request'): (
        {"name": 'CreateTopicsRequest', "valid": (0, 7), "flexible": 5, "fields": (
            ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('num_partitions', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                ('replication_factor', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                ('assignments', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('broker_ids', '[]int32', (0, 32767), None, None, None, (), False, None, None),
                ), 'CreatableReplicaAssignment'),
                ('configs', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                    ('value', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
                ), 'CreatableTopicConfig'),
            ), 'CreatableTopic'),
            ('timeout_ms', 'int32', (0, 32767), None, None, None, 60000, False, None, None),
            ('validate_only', 'bool', (1, 32767), None, None, None, False, False, None, None),
        )},
    ),
    (19, 'response'): (
        {"name": 'CreateTopicsResponse', "valid": (0, 7), "flexible": 5, "fields": (
            ('throttle_time_ms', 'int32', (2, 32767), None, None, None, 0, True, None, None),
            ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('topic_id', 'uuid', (7, 32767), None, None, None, None, True, None, None),
                ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                ('error_message', 'string', (1, 32767), (0, 32767), None, None, '', True, None, None),
                ('topic_config_error_code', 'int16', (5, 32767), None, 0, (5, 32767), 0, True, None, None),
                ('num_partitions', 'int32', (5, 32767), None, None, None, -1, True, None, None),
                ('replication_factor', 'int16', (5, 32767), None, None, None, -1, True, None, None),
                ('configs', '[]struct', (5, 32767), (5, 32767), None, None, (), True, (
                    ('name', 'string', (5, 32767), None, None, None, '', False, None, None),
                    ('value', 'string', (5, 32767), (5, 32767), None, None, '', False, None, None),
                    ('read_only', 'bool', (5, 32767), None, None, None, False, False, None, None),
                    ('config_source', 'int8', (5, 32767), None, None, None, -1, True, None, None),
                    ('is_sensitive', 'bool', (5, 32767), None, None, None, False, False, None, None),
                ), 'CreatableTopicConfigs'),
            ), 'CreatableTopicResult'),
        )},
    ),
    (20, 'request'): (
        {"name": 'DeleteTopicsRequest', "valid": (0, 6), "flexible": 4, "fields": (
            ('topics', '[]struct', (6, 32767), None, None, None, (), False, (
                ('name', 'string', (6, 32767), (6, 32767), None, None, None, False, None, None),
                ('topic_id', 'uuid', (6, 32767), None, None, None, None, False, None, None),
            ), 'DeleteTopicState'),
            ('topic_names', '[]string', (0, 5), None, None, None, (), True, None, None),
            ('timeout_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
        )},
    ),
    (20, 'response'): (
        {"name": 'DeleteTopicsResponse', "valid": (0, 6), "flexible": 4, "fields": (
            ('throttle_time_ms', 'int32', (1, 32767), None, None, None, 0, True, None, None),
            ('responses', '[]struct', (0, 32767), None, None, None, (), False, (
                ('name', 'string', (0, 32767), (6, 32767), None, None, '', False, None, None),
                ('topic_id', 'uuid', (6, 32767), None, None, None, None, True, None, None),
                ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                ('error_message', 'string', (5, 32767), (5, 32767), None, None, None, True, None, None),
            ), 'DeletableTopicResult'),
        )},
    ),
    (21, 'request'): (
        {"name": 'DeleteRecordsRequest', "valid": (0, 2), "flexible": 2, "fields": (
            ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('offset', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                ), 'DeleteRecordsPartition'),
            ), 'DeleteRecordsTopic'),
            ('timeout_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
        )},
    ),
    (21, 'response'): (
        {"name": 'DeleteRecordsResponse', "valid": (0, 2), "flexible": 2, "fields": (
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('low_watermark', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                    ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                ), 'DeleteRecordsPartitionResult'),
            ), 'DeleteRecordsTopicResult'),
        )},
    ),
    (22, 'request'): (
        {"name": 'InitProducerIdRequest', "valid": (0, 6), "flexible": 2, "fields": (
            ('transactional_id', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
            ('transaction_timeout_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('producer_id', 'int64', (3, 32767), None, None, None, -1, False, None, None),
            ('producer_epoch', 'int16', (3, 32767), None, None, None, -1, False, None, None),
            ('enable2_pc', 'bool', (6, 32767), None, None, None, False, False, None, None),
            ('keep_prepared_txn', 'bool', (6, 32767), None, None, None, False, False, None, None),
        )},
    ),
    (22, 'response'): (
        {"name": 'InitProducerIdResponse', "valid": (0, 6), "flexible": 2, "fields": (
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, True, None, None),
            ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ('producer_id', 'int64', (0, 32767), None, None, None, -1, False, None, None),
            ('producer_epoch', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ('ongoing_txn_producer_id', 'int64', (6, 32767), None, None, None, -1, False, None, None),
            ('ongoing_txn_producer_epoch', 'int16', (6, 32767), None, None, None, -1, False, None, None),
        )},
    ),
    (24, 'request'): (
        {"name": 'AddPartitionsToTxnRequest', "valid": (0, 5), "flexible": 3, "fields": (
            ('transactions', '[]struct', (4, 32767), None, None, None, (), False, (
                ('transactional_id', 'string', (4, 32767), None, None, None, '', False, None, None),
                ('producer_id', 'int64', (4, 32767), None, None, None, 0, False, None, None),
                ('producer_epoch', 'int16', (4, 32767), None, None, None, 0, False, None, None),
                ('verify_only', 'bool', (4, 32767), None, None, None, False, False, None, None),
                ('topics', '[]struct', (4, 32767), None, None, None, (), False, (
                    ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                    ('partitions', '[]int32', (0, 32767), None, None, None, (), False, None, None),
                ), 'AddPartitionsToTxnTopic'),
            ), 'AddPartitionsToTxnTransaction'),
            ('v3_and_below_transactional_id', 'string', (0, 3), None, None, None, '', False, None, None),
            ('v3_and_below_producer_id', 'int64', (0, 3), None, None, None, 0, False, None, None),
            ('v3_and_below_producer_epoch', 'int16', (0, 3), None, None, None, 0, False, None, None),
            ('v3_and_below_topics', '[]struct', (0, 3), None, None, None, (), False, (
                ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('partitions', '[]int32', (0, 32767), None, None, None, (), False, None, None),
            ), 'AddPartitionsToTxnTopic'),
        )},
    ),
    (24, 'response'): (
        {"name": 'AddPartitionsToTxnResponse', "valid": (0, 5), "flexible": 3, "fields": (
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('error_code', 'int16', (4, 32767), None, None, None, 0, True, None, None),
            ('results_by_transaction', '[]struct', (4, 32767), None, None, None, (), False, (
                ('transactional_id', 'string', (4, 32767), None, None, None, '', False, None, None),
                ('topic_results', '[]struct', (4, 32767), None, None, None, (), False, (
                    ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                    ('results_by_partition', '[]struct', (0, 32767), None, None, None, (), False, (
                        ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                        ('partition_error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                    ), 'AddPartitionsToTxnPartitionResult'),
                ), 'AddPartitionsToTxnTopicResult'),
            ), 'AddPartitionsToTxnResult'),
            ('results_by_topic_v3_and_below', '[]struct', (0, 3), None, None, None, (), False, (
                ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('results_by_partition', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('partition_error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                ), 'AddPartitionsToTxnPartitionResult'),
            ), 'AddPartitionsToTxnTopicResult'),
        )},
    ),
    (27, 'request'): (
        {"name": 'WriteTxnMarkersRequest', "valid": (1, 2), "flexible": 1, "fields": (
            ('markers', '[]struct', (0, 32767), None, None, None, (), False, (
                ('producer_id', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                ('producer_epoch', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                ('transaction_result', 'bool', (0, 32767), None, None, None, False, False, None, None),
                ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                    ('partition_indexes', '[]int32', (0, 32767), None, None, None, (), False, None, None),
                ), 'WritableTxnMarkerTopic'),
                ('coordinator_epoch', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                ('transaction_version', 'int8', (2, 32767), None, None, None, 0, True, None, None),
            ), 'WritableTxnMarker'),
        )},
    ),
    (27, 'response'): (
        {"name": 'WriteTxnMarkersResponse', "valid": (1, 2), "flexible": 1, "fields": (
            ('markers', '[]struct', (0, 32767), None, None, None, (), False, (
                ('producer_id', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                    ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                        ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                        ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                    ), 'WritableTxnMarkerPartitionResult'),
                ), 'WritableTxnMarkerTopicResult'),
            ), 'WritableTxnMarkerResult'),
        )},
    ),
    (28, 'request'): (
        {"name": 'TxnOffsetCommitRequest', "valid": (0, 5), "flexible": 3, "fields": (
            ('transactional_id', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('group_id', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('producer_id', 'int64', (0, 32767), None, None, None, 0, False, None, None),
            ('producer_epoch', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ('generation_id', 'int32', (3, 32767), None, None, None, -1, False, None, None),
            ('member_id', 'string', (3, 32767), None, None, None, '', False, None, None),
            ('group_instance_id', 'string', (3, 32767), (3, 32767), None, None, None, False, None, None),
            ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('committed_offset', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                    ('committed_leader_epoch', 'int32', (2, 32767), None, None, None, -1, True, None, None),
                    ('committed_metadata', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
                ), 'TxnOffsetCommitRequestPartition'),
            ), 'TxnOffsetCommitRequestTopic'),
        )},
    ),
    (28, 'response'): (
        {"name": 'TxnOffsetCommitResponse', "valid": (0, 5), "flexible": 3, "fields": (
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                ), 'TxnOffsetCommitResponsePartition'),
            ), 'TxnOffsetCommitResponseTopic'),
        )},
    ),
    (32, 'request'): (
        {"name": 'DescribeConfigsRequest', "valid": (0, 4), "flexible": 4, "fields": (
            ('resources', '[]struct', (0, 32767), None, None, None, (), False, (
                ('resource_type', 'int8', (0, 32767), None, None, None, 0, False, None, None),
                ('resource_name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('configuration_keys', '[]string', (0, 32767), (0, 32767), None, None, (), False, None, None),
            ), 'DescribeConfigsResource'),
            ('include_synonyms', 'bool', (1, 32767), None, None, None, False, False, None, None),
            ('include_documentation', 'bool', (3, 32767), None, None, None, False, False, None, None),
        )},
    ),
    (32, 'response'): (
        {"name": 'DescribeConfigsResponse', "valid": (0, 4), "flexible": 4, "fields": (
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('results', '[]struct', (0, 32767), None, None, None, (), False, (
                ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                ('error_message', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
                ('resource_type', 'int8', (0, 32767), None, None, None, 0, False, None, None),
                ('resource_name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('configs', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                    ('value', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
                    ('read_only', 'bool', (0, 32767), None, None, None, False, False, None, None),
                    ('config_source', 'int8', (1, 32767), None, None, None, -1, True, None, None),
                    ('is_default', 'bool', (0, 0), None, None, None, False, False, None, None),
                    ('is_sensitive', 'bool', (0, 32767), None, None, None, False, False, None, None),
                    ('synonyms', '[]struct', (1, 32767), None, None, None, (), True, (
                        ('name', 'string', (1, 32767), None, None, None, '', False, None, None),
                        ('value', 'string', (1, 32767), (0, 32767), None, None, '', False, None, None),
                        ('source', 'int8', (1, 32767), None, None, None, 0, False, None, None),
                    ), 'DescribeConfigsSynonym'),
                    ('config_type', 'int8', (3, 32767), None, None, None, 0, True, None, None),
                    ('documentation', 'string', (3, 32767), (0, 32767), None, None, '', True, None, None),
                ), 'DescribeConfigsResourceResult'),
            ), 'DescribeConfigsResult'),
        )},
    ),
    (33, 'request'): (
        {"name": 'AlterConfigsRequest', "valid": (0, 2), "flexible": 2, "fields": (
            ('resources', '[]struct', (0, 32767), None, None, None, (), False, (
                ('resource_type', 'int8', (0, 32767), None, None, None, 0, False, None, None),
                ('resource_name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('configs', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                    ('value', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
                ), 'AlterableConfig'),
            ), 'AlterConfigsResource'),
            ('validate_only', 'bool', (0, 32767), None, None, None, False, False, None, None),
        )},
    ),
    (33, 'response'): (
        {"name": 'AlterConfigsResponse', "valid": (0, 2), "flexible": 2, "fields": (
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('responses', '[]struct', (0, 32767), None, None, None, (), False, (
                ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                ('error_message', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
                ('resource_type', 'int8', (0, 32767), None, None, None, 0, False, None, None),
                ('resource_name', 'string', (0, 32767), None, None, None, '', False, None, None),
            ), 'AlterConfigsResourceResponse'),
        )},
    ),
    (35, 'request'): (
        {"name": 'DescribeLogDirsRequest', "valid": (1, 5), "flexible": 2, "fields": (
            ('topics', '[]struct', (0, 32767), (0, 32767), None, None, (), False, (
                ('topic', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('partitions', '[]int32', (0, 32767), None, None, None, (), False, None, None),
            ), 'DescribableLogDirTopic'),
        )},
    ),
    (35, 'response'): (
        {"name": 'DescribeLogDirsResponse', "valid": (1, 5), "flexible": 2, "fields": (
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('error_code', 'int16', (3, 32767), None, None, None, 0, True, None, None),
            ('results', '[]struct', (0, 32767), None, None, None, (), False, (
                ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                ('log_dir', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                    ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                        ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                        ('partition_size', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                        ('offset_lag', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                        ('is_future_key', 'bool', (0, 32767), None, None, None, False, False, None, None),
                    ), 'DescribeLogDirsPartition'),
                ), 'DescribeLogDirsTopic'),
                ('total_bytes', 'int64', (4, 32767), None, None, None, -1, True, None, None),
                ('usable_bytes', 'int64', (4, 32767), None, None, None, -1, True, None, None),
                ('is_cordoned', 'bool', (5, 32767), None, None, None, False, True, None, None),
            ), 'DescribeLogDirsResult'),
        )},
    ),
    (36, 'request'): (
        {"name": 'SaslAuthenticateRequest', "valid": (0, 2), "flexible": 2, "fields": (
            ('auth_bytes', 'bytes', (0, 32767), None, None, None, b'', False, None, None),
        )},
    ),
    (36, 'response'): (
        {"name": 'SaslAuthenticateResponse', "valid": (0, 2), "flexible": 2, "fields": (
            ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ('error_message', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
            ('auth_bytes', 'bytes', (0, 32767), None, None, None, b'', False, None, None),
            ('session_lifetime_ms', 'int64', (1, 32767), None, None, None, 0, True, None, None),
        )},
    ),
    (37, 'request'): (
        {"name": 'CreatePartitionsRequest', "valid": (0, 3), "flexible": 2, "fields": (
            ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('count', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                ('assignments', '[]struct', (0, 32767), (0, 32767), None, None, (), False, (
                    ('broker_ids', '[]int32', (0, 32767), None, None, None, (), False, None, None),
                ), 'CreatePartitionsAssignment'),
            ), 'CreatePartitionsTopic'),
            ('timeout_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('validate_only', 'bool', (0, 32767), None, None, None, False, False, None, None),
        )},
    ),
    (37, 'response'): (
        {"name": 'CreatePartitionsResponse', "valid": (0, 3), "flexible": 2, "fields": (
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('results', '[]struct', (0, 32767), None, None, None, (), False, (
                ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                ('error_message', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ), 'CreatePartitionsTopicResult'),
        )},
    ),
    (41, 'request'): (
        {"name": 'DescribeDelegationTokenRequest', "valid": (1, 3), "flexible": 2, "fields": (
            ('owners', '[]struct', (0, 32767), (0, 32767), None, None, (), False, (
                ('principal_type', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('principal_name', 'string', (0, 32767), None, None, None, '', False, None, None),
            ), 'DescribeDelegationTokenOwner'),
        )},
    ),
    (41, 'response'): (
        {"name": 'DescribeDelegationTokenResponse', "valid": (1, 3), "flexible": 2, "fields": (
            ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ('tokens', '[]struct', (0, 32767), None, None, None, (), False, (
                ('principal_type', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('principal_name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('token_requester_principal_type', 'string', (3, 32767), None, None, None, '', False, None, None),
                ('token_requester_principal_name', 'string', (3, 32767), None, None, None, '', False, None, None),
                ('issue_timestamp', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                ('expiry_timestamp', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                ('max_timestamp', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                ('token_id', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('hmac', 'bytes', (0, 32767), None, None, None, b'', False, None, None),
                ('renewers', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('principal_type', 'string', (0, 32767), None, None, None, '', False, None, None),
                    ('principal_name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ), 'DescribedDelegationTokenRenewer'),
            ), 'DescribedDelegationToken'),
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
        )},
    ),
    (44, 'request'): (
        {"name": 'IncrementalAlterConfigsRequest', "valid": (0, 1), "flexible": 1, "fields": (
            ('resources', '[]struct', (0, 32767), None, None, None, (), False, (
                ('resource_type', 'int8', (0, 32767), None, None, None, 0, False, None, None),
                ('resource_name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('configs', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                    ('config_operation', 'int8', (0, 32767), None, None, None, 0, False, None, None),
                    ('value', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
                ), 'AlterableConfig'),
            ), 'AlterConfigsResource'),
            ('validate_only', 'bool', (0, 32767), None, None, None, False, False, None, None),
        )},
    ),
    (44, 'response'): (
        {"name": 'IncrementalAlterConfigsResponse', "valid": (0, 1), "flexible": 1, "fields": (
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('responses', '[]struct', (0, 32767), None, None, None, (), False, (
                ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                ('error_message', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
                ('resource_type', 'int8', (0, 32767), None, None, None, 0, False, None, None),
                ('resource_name', 'string', (0, 32767), None, None, None, '', False, None, None),
            ), 'AlterConfigsResourceResponse'),
        )},
    ),
    (45, 'request'): (
        {"name": 'AlterPartitionReassignmentsRequest', "valid": (0, 1), "flexible": 0, "fields": (
            ('timeout_ms', 'int32', (0, 32767), None, None, None, 60000, False, None, None),
            ('allow_replication_factor_change', 'bool', (1, 32767), None, None, None, True, False, None, None),
            ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('replicas', '[]int32', (0, 32767), (0, 32767), None, None, None, False, None, None),
                ), 'ReassignablePartition'),
            ), 'ReassignableTopic'),
        )},
    ),
    (45, 'response'): (
        {"name": 'AlterPartitionReassignmentsResponse', "valid": (0, 1), "flexible": 0, "fields": (
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('allow_replication_factor_change', 'bool', (1, 32767), None, None, None, True, True, None, None),
            ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ('error_message', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
            ('responses', '[]struct', (0, 32767), None, None, None, (), False, (
                ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                    ('error_message', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
                ), 'ReassignablePartitionResponse'),
            ), 'ReassignableTopicResponse'),
        )},
    ),
    (47, 'request'): (
        {"name": 'OffsetDeleteRequest', "valid": (0, 0), "flexible": None, "fields": (
            ('group_id', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                ), 'OffsetDeleteRequestPartition'),
            ), 'OffsetDeleteRequestTopic'),
        )},
    ),
    (47, 'response'): (
        {"name": 'OffsetDeleteResponse', "valid": (0, 0), "flexible": None, "fields": (
            ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, True, None, None),
            ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                ), 'OffsetDeleteResponsePartition'),
            ), 'OffsetDeleteResponseTopic'),
        )},
    ),
    (48, 'request'): (
        {"name": 'DescribeClientQuotasRequest', "valid": (0, 1), "flexible": 1, "fields": (
            ('components', '[]struct', (0, 32767), None, None, None, (), False, (
                ('entity_type', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('match_type', 'int8', (0, 32767), None, None, None, 0, False, None, None),
                ('match', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
            ), 'ComponentData'),
            ('strict', 'bool', (0, 32767), None, None, None, False, False, None, None),
        )},
    ),
    (48, 'response'): (
        {"name": 'DescribeClientQuotasResponse', "valid": (0, 1), "flexible": 1, "fields": (
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ('error_message', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
            ('entries', '[]struct', (0, 32767), (0, 32767), None, None, (), False, (
                ('entity', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('entity_type', 'string', (0, 32767), None, None, None, '', False, None, None),
                    ('entity_name', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
                ), 'EntityData'),
                ('values', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('key', 'string', (0, 32767), None, None, None, '', False, None, None),
                    ('value', 'float64', (0, 32767), None, None, None, 0.0, False, None, None),
                ), 'ValueData'),
            ), 'EntryData'),
        )},
    ),
    (49, 'request'): (
        {"name": 'AlterClientQuotasRequest', "valid": (0, 1), "flexible": 1, "fields": (
            ('entries', '[]struct', (0, 32767), None, None, None, (), False, (
                ('entity', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('entity_type', 'string', (0, 32767), None, None, None, '', False, None, None),
                    ('entity_name', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
                ), 'EntityData'),
                ('ops', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('key', 'string', (0, 32767), None, None, None, '', False, None, None),
                    ('value', 'float64', (0, 32767), None, None, None, 0.0, False, None, None),
                    ('remove', 'bool', (0, 32767), None, None, None, False, False, None, None),
                ), 'OpData'),
            ), 'EntryData'),
            ('validate_only', 'bool', (0, 32767), None, None, None, False, False, None, None),
        )},
    ),
    (49, 'response'): (
        {"name": 'AlterClientQuotasResponse', "valid": (0, 1), "flexible": 1, "fields": (
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('entries', '[]struct', (0, 32767), None, None, None, (), False, (
                ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                ('error_message', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
                ('entity', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('entity_type', 'string', (0, 32767), None, None, None, '', False, None, None),
                    ('entity_name', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
                ), 'EntityData'),
            ), 'EntryData'),
        )},
    ),
    (60, 'request'): (
        {"name": 'DescribeClusterRequest', "valid": (0, 2), "flexible": 0, "fields": (
            ('include_cluster_authorized_operations', 'bool', (0, 32767), None, None, None, False, False, None, None),
            ('endpoint_type', 'int8', (1, 32767), None, None, None, 1, False, None, None),
            ('include_fenced_brokers', 'bool', (2, 32767), None, None, None, False, False, None, None),
        )},
    ),
    (60, 'response'): (
        {"name": 'DescribeClusterResponse', "valid": (0, 2), "flexible": 0, "fields": (
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ('error_message', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ('endpoint_type', 'int8', (1, 32767), None, None, None, 1, False, None, None),
            ('cluster_id', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('controller_id', 'int32', (0, 32767), None, None, None, -1, False, None, None),
            ('brokers', '[]struct', (0, 32767), None, None, None, (), False, (
                ('broker_id', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                ('host', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('port', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                ('rack', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
                ('is_fenced', 'bool', (2, 32767), None, None, None, False, False, None, None),
            ), 'DescribeClusterBroker'),
            ('cluster_authorized_operations', 'int32', (0, 32767), None, None, None, -2147483648, False, None, None),
        )},
    ),
    (65, 'request'): (
        {"name": 'DescribeTransactionsRequest', "valid": (0, 0), "flexible": 0, "fields": (
            ('transactional_ids', '[]string', (0, 32767), None, None, None, (), False, None, None),
        )},
    ),
    (65, 'response'): (
        {"name": 'DescribeTransactionsResponse', "valid": (0, 0), "flexible": 0, "fields": (
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('transaction_states', '[]struct', (0, 32767), None, None, None, (), False, (
                ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                ('transactional_id', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('transaction_state', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('transaction_timeout_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                ('transaction_start_time_ms', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                ('producer_id', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                ('producer_epoch', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('topic', 'string', (0, 32767), None, None, None, '', False, None, None),
                    ('partitions', '[]int32', (0, 32767), None, None, None, (), False, None, None),
                ), 'TopicData'),
            ), 'TransactionState'),
        )},
    ),
    (68, 'request'): (
        {"name": 'ConsumerGroupHeartbeatRequest', "valid": (0, 1), "flexible": 0, "fields": (
            ('group_id', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('member_id', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('member_epoch', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('instance_id', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ('rack_id', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ('rebalance_timeout_ms', 'int32', (0, 32767), None, None, None, -1, False, None, None),
            ('subscribed_topic_names', '[]string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ('subscribed_topic_regex', 'string', (1, 32767), (1, 32767), None, None, None, False, None, None),
            ('server_assignor', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ('topic_partitions', '[]struct', (0, 32767), (0, 32767), None, None, None, False, (
                ('topic_id', 'uuid', (0, 32767), None, None, None, None, False, None, None),
                ('partitions', '[]int32', (0, 32767), None, None, None, (), False, None, None),
            ), 'TopicPartitions'),
        )},
    ),
    (68, 'response'): (
        {"name": 'ConsumerGroupHeartbeatResponse', "valid": (0, 1), "flexible": 0, "fields": (
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ('error_message', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ('member_id', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ('member_epoch', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('heartbeat_interval_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('assignment', 'struct', (0, 32767), (0, 32767), None, None, None, False, (
                ('topic_partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('topic_id', 'uuid', (0, 32767), None, None, None, None, False, None, None),
                    ('partitions', '[]int32', (0, 32767), None, None, None, (), False, None, None),
                ), 'TopicPartitions'),
            ), 'Assignment'),
        )},
    ),
    (76, 'request'): (
        {"name": 'ShareGroupHeartbeatRequest', "valid": (0, 1), "flexible": 0, "fields": (
            ('group_id', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('member_id', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('member_epoch', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('rack_id', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ('subscribed_topic_names', '[]string', (0, 32767), (0, 32767), None, None, None, False, None, None),
        )},
    ),
    (76, 'response'): (
        {"name": 'ShareGroupHeartbeatResponse', "valid": (0, 1), "flexible": 0, "fields": (
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ('error_message', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ('member_id', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ('member_epoch', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('heartbeat_interval_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('assignment', 'struct', (0, 32767), (0, 32767), None, None, None, False, (
                ('topic_partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('topic_id', 'uuid', (0, 32767), None, None, None, None, False, None, None),
                    ('partitions', '[]int32', (0, 32767), None, None, None, (), False, None, None),
                ), 'TopicPartitions'),
            ), 'Assignment'),
        )},
    ),
    (78, 'request'): (
        {"name": 'ShareFetchRequest', "valid": (0, 2), "flexible": 0, "fields": (
            ('group_id', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ('member_id', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
            ('share_session_epoch', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('max_wait_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('min_bytes', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('max_bytes', 'int32', (0, 32767), None, None, None, 2147483647, False, None, None),
            ('max_records', 'int32', (1, 32767), None, None, None, 0, False, None, None),
            ('batch_size', 'int32', (1, 32767), None, None, None, 0, False, None, None),
            ('share_acquire_mode', 'int8', (2, 32767), None, None, None, 0, True, None, None),
            ('is_renew_ack', 'bool', (2, 32767), None, None, None, False, False, None, None),
            ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                ('topic_id', 'uuid', (0, 32767), None, None, None, None, False, None, None),
                ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('partition_max_bytes', 'int32', (0, 0), None, None, None, 0, False, None, None),
                    ('acknowledgement_batches', '[]struct', (0, 32767), None, None, None, (), False, (
                        ('first_offset', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                        ('last_offset', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                        ('acknowledge_types', '[]int8', (0, 32767), None, None, None, (), False, None, None),
                    ), 'AcknowledgementBatch'),
                ), 'FetchPartition'),
            ), 'FetchTopic'),
            ('forgotten_topics_data', '[]struct', (0, 32767), None, None, None, (), False, (
                ('topic_id', 'uuid', (0, 32767), None, None, None, None, False, None, None),
                ('partitions', '[]int32', (0, 32767), None, None, None, (), False, None, None),
            ), 'ForgottenTopic'),
        )},
    ),
    (78, 'response'): (
        {"name": 'ShareFetchResponse', "valid": (0, 2), "flexible": 0, "fields": (
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ('error_message', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ('acquisition_lock_timeout_ms', 'int32', (1, 32767), None, None, None, 0, False, None, None),
            ('responses', '[]struct', (0, 32767), None, None, None, (), False, (
                ('topic_id', 'uuid', (0, 32767), None, None, None, None, False, None, None),
                ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                    ('error_message', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
                    ('acknowledge_error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                    ('acknowledge_error_message', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
                    ('current_leader', 'struct', (0, 32767), None, None, None, None, False, (
                        ('leader_id', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                        ('leader_epoch', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ), 'LeaderIdAndEpoch'),
                    ('records', 'records', (0, 32767), (0, 0), None, None, None, False, None, None),
                    ('acquired_records', '[]struct', (0, 32767), None, None, None, (), False, (
                        ('first_offset', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                        ('last_offset', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                        ('delivery_count', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                    ), 'AcquiredRecords'),
                ), 'PartitionData'),
            ), 'ShareFetchableTopicResponse'),
            ('node_endpoints', '[]struct', (0, 32767), None, None, None, (), False, (
                ('node_id', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                ('host', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('port', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                ('rack', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ), 'NodeEndpoint'),
        )},
    ),
    (79, 'request'): (
        {"name": 'ShareAcknowledgeRequest', "valid": (0, 2), "flexible": 0, "fields": (
            ('group_id', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ('member_id', 'string', (0, 32767), (0, 32767), None, None, '', False, None, None),
            ('share_session_epoch', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('is_renew_ack', 'bool', (2, 32767), None, None, None, False, False, None, None),
            ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                ('topic_id', 'uuid', (0, 32767), None, None, None, None, False, None, None),
                ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('acknowledgement_batches', '[]struct', (0, 32767), None, None, None, (), False, (
                        ('first_offset', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                        ('last_offset', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                        ('acknowledge_types', '[]int8', (0, 32767), None, None, None, (), False, None, None),
                    ), 'AcknowledgementBatch'),
                ), 'AcknowledgePartition'),
            ), 'AcknowledgeTopic'),
        )},
    ),
    (79, 'response'): (
        {"name": 'ShareAcknowledgeResponse', "valid": (0, 2), "flexible": 0, "fields": (
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ('error_message', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ('acquisition_lock_timeout_ms', 'int32', (2, 32767), None, None, None, 0, True, None, None),
            ('responses', '[]struct', (0, 32767), None, None, None, (), False, (
                ('topic_id', 'uuid', (0, 32767), None, None, None, None, False, None, None),
                ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                    ('error_message', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
                    ('current_leader', 'struct', (0, 32767), None, None, None, None, False, (
                        ('leader_id', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                        ('leader_epoch', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ), 'LeaderIdAndEpoch'),
                ), 'PartitionData'),
            ), 'ShareAcknowledgeTopicResponse'),
            ('node_endpoints', '[]struct', (0, 32767), None, None, None, (), False, (
                ('node_id', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                ('host', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('port', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                ('rack', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ), 'NodeEndpoint'),
        )},
    ),
    (88, 'request'): (
        {"name": 'StreamsGroupHeartbeatRequest', "valid": (0, 1), "flexible": 0, "fields": (
            ('group_id', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('member_id', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('member_epoch', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('endpoint_information_epoch', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('instance_id', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ('rack_id', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ('rebalance_timeout_ms', 'int32', (0, 32767), None, None, None, -1, False, None, None),
            ('topology', 'struct', (0, 32767), (0, 32767), None, None, None, False, (
                ('epoch', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                ('subtopologies', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('subtopology_id', 'string', (0, 32767), None, None, None, '', False, None, None),
                    ('source_topics', '[]string', (0, 32767), None, None, None, (), False, None, None),
                    ('source_topic_regex', '[]string', (0, 32767), None, None, None, (), False, None, None),
                    ('state_changelog_topics', '[]struct', (0, 32767), None, None, None, (), False, (
                        ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                        ('partitions', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                        ('replication_factor', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                        ('topic_configs', '[]struct', (0, 32767), None, None, None, (), False, (
                            ('key', 'string', (0, 32767), None, None, None, '', False, None, None),
                            ('value', 'string', (0, 32767), None, None, None, '', False, None, None),
                        ), 'KeyValue'),
                    ), 'TopicInfo'),
                    ('repartition_sink_topics', '[]string', (0, 32767), None, None, None, (), False, None, None),
                    ('repartition_source_topics', '[]struct', (0, 32767), None, None, None, (), False, (
                        ('name', 'string', (0, 32767), None, None, None, '', False, None, None),
                        ('partitions', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                        ('replication_factor', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                        ('topic_configs', '[]struct', (0, 32767), None, None, None, (), False, (
                            ('key', 'string', (0, 32767), None, None, None, '', False, None, None),
                            ('value', 'string', (0, 32767), None, None, None, '', False, None, None),
                        ), 'KeyValue'),
                    ), 'TopicInfo'),
                    ('copartition_groups', '[]struct', (0, 32767), None, None, None, (), False, (
                        ('source_topics', '[]int16', (0, 32767), None, None, None, (), False, None, None),
                        ('source_topic_regex', '[]int16', (0, 32767), None, None, None, (), False, None, None),
                        ('repartition_source_topics', '[]int16', (0, 32767), None, None, None, (), False, None, None),
                    ), 'CopartitionGroup'),
                ), 'Subtopology'),
            ), 'Topology'),
            ('active_tasks', '[]struct', (0, 32767), (0, 32767), None, None, None, False, (
                ('subtopology_id', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('partitions', '[]int32', (0, 32767), None, None, None, (), False, None, None),
            ), 'TaskIds'),
            ('standby_tasks', '[]struct', (0, 32767), (0, 32767), None, None, None, False, (
                ('subtopology_id', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('partitions', '[]int32', (0, 32767), None, None, None, (), False, None, None),
            ), 'TaskIds'),
            ('warmup_tasks', '[]struct', (0, 32767), (0, 32767), None, None, None, False, (
                ('subtopology_id', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('partitions', '[]int32', (0, 32767), None, None, None, (), False, None, None),
            ), 'TaskIds'),
            ('process_id', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ('user_endpoint', 'struct', (0, 32767), (0, 32767), None, None, None, False, (
                ('host', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('port', 'uint16', (0, 32767), None, None, None, 0, False, None, None),
            ), 'Endpoint'),
            ('client_tags', '[]struct', (0, 32767), (0, 32767), None, None, None, False, (
                ('key', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('value', 'string', (0, 32767), None, None, None, '', False, None, None),
            ), 'KeyValue'),
            ('task_offsets', '[]struct', (0, 32767), (0, 32767), None, None, None, False, (
                ('subtopology_id', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('partition', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                ('offset', 'int64', (0, 32767), None, None, None, 0, False, None, None),
            ), 'TaskOffset'),
            ('task_end_offsets', '[]struct', (0, 32767), (0, 32767), None, None, None, False, (
                ('subtopology_id', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('partition', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                ('offset', 'int64', (0, 32767), None, None, None, 0, False, None, None),
            ), 'TaskOffset'),
            ('shutdown_application', 'bool', (0, 32767), None, None, None, False, False, None, None),
        )},
    ),
    (88, 'response'): (
        {"name": 'StreamsGroupHeartbeatResponse', "valid": (0, 1), "flexible": 0, "fields": (
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ('error_message', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ('member_id', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('member_epoch', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('heartbeat_interval_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('acceptable_recovery_lag_legacy', 'int32', (0, 0), None, None, None, 0, False, None, None),
            ('task_offset_interval_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('acceptable_recovery_lag', 'int64', (1, 32767), None, None, None, -1, True, None, None),
            ('status', '[]struct', (0, 32767), (0, 32767), None, None, (), False, (
                ('status_code', 'int8', (0, 32767), None, None, None, 0, False, None, None),
                ('status_detail', 'string', (0, 32767), None, None, None, '', False, None, None),
            ), 'Status'),
            ('active_tasks', '[]struct', (0, 32767), (0, 32767), None, None, None, False, (
                ('subtopology_id', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('partitions', '[]int32', (0, 32767), None, None, None, (), False, None, None),
            ), 'TaskIds'),
            ('standby_tasks', '[]struct', (0, 32767), (0, 32767), None, None, None, False, (
                ('subtopology_id', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('partitions', '[]int32', (0, 32767), None, None, None, (), False, None, None),
            ), 'TaskIds'),
            ('warmup_tasks', '[]struct', (0, 32767), (0, 32767), None, None, None, False, (
                ('subtopology_id', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('partitions', '[]int32', (0, 32767), None, None, None, (), False, None, None),
            ), 'TaskIds'),
            ('topology_description_required', 'bool', (1, 32767), None, None, None, False, False, None, None),
            ('endpoint_information_epoch', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('partitions_by_user_endpoint', '[]struct', (0, 32767), (0, 32767), None, None, None, False, (
                ('user_endpoint', 'struct', (0, 32767), None, None, None, None, False, (
                    ('host', 'string', (0, 32767), None, None, None, '', False, None, None),
                    ('port', 'uint16', (0, 32767), None, None, None, 0, False, None, None),
                ), 'Endpoint'),
                ('active_partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('topic', 'string', (0, 32767), None, None, None, '', False, None, None),
                    ('partitions', '[]int32', (0, 32767), None, None, None, (), False, None, None),
                ), 'TopicPartition'),
                ('standby_partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('topic', 'string', (0, 32767), None, None, None, '', False, None, None),
                    ('partitions', '[]int32', (0, 32767), None, None, None, (), False, None, None),
                ), 'TopicPartition'),
            ), 'EndpointToPartitions'),
        )},
    ),
    (91, 'request'): (
        {"name": 'AlterShareGroupOffsetsRequest', "valid": (0, 0), "flexible": 0, "fields": (
            ('group_id', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                ('topic_name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('start_offset', 'int64', (0, 32767), None, None, None, 0, False, None, None),
                ), 'AlterShareGroupOffsetsRequestPartition'),
            ), 'AlterShareGroupOffsetsRequestTopic'),
        )},
    ),
    (91, 'response'): (
        {"name": 'AlterShareGroupOffsetsResponse', "valid": (0, 0), "flexible": 0, "fields": (
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ('error_message', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ('responses', '[]struct', (0, 32767), None, None, None, (), False, (
                ('topic_name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('topic_id', 'uuid', (0, 32767), None, None, None, None, False, None, None),
                ('partitions', '[]struct', (0, 32767), None, None, None, (), False, (
                    ('partition_index', 'int32', (0, 32767), None, None, None, 0, False, None, None),
                    ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                    ('error_message', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
                ), 'AlterShareGroupOffsetsResponsePartition'),
            ), 'AlterShareGroupOffsetsResponseTopic'),
        )},
    ),
    (92, 'request'): (
        {"name": 'DeleteShareGroupOffsetsRequest', "valid": (0, 0), "flexible": 0, "fields": (
            ('group_id', 'string', (0, 32767), None, None, None, '', False, None, None),
            ('topics', '[]struct', (0, 32767), None, None, None, (), False, (
                ('topic_name', 'string', (0, 32767), None, None, None, '', False, None, None),
            ), 'DeleteShareGroupOffsetsRequestTopic'),
        )},
    ),
    (92, 'response'): (
        {"name": 'DeleteShareGroupOffsetsResponse', "valid": (0, 0), "flexible": 0, "fields": (
            ('throttle_time_ms', 'int32', (0, 32767), None, None, None, 0, False, None, None),
            ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
            ('error_message', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ('responses', '[]struct', (0, 32767), None, None, None, (), False, (
                ('topic_name', 'string', (0, 32767), None, None, None, '', False, None, None),
                ('topic_id', 'uuid', (0, 32767), None, None, None, None, False, None, None),
                ('error_code', 'int16', (0, 32767), None, None, None, 0, False, None, None),
                ('error_message', 'string', (0, 32767), (0, 32767), None, None, None, False, None, None),
            ), 'DeleteShareGroupOffsetsResponseTopic'),
        )},
    ),
}
