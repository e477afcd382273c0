"""Values of Kafka's enumerated fields that the proxy reads or writes, each named as Kafka's Java code names it.

API keys and their versions are in :mod:`proxy.codec.apis`, error codes in :mod:`proxy.codec.error_codes`.
"""

from __future__ import annotations

# ConfigResource.Type: resource_type in DescribeConfigs, AlterConfigs and IncrementalAlterConfigs
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4

# AlterConfigOp.OpType: config_operation in IncrementalAlterConfigs
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

# ConfigEntry.ConfigSource: config_source in DescribeConfigs responses
DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 3, 4, 5

# ConfigEntry.ConfigType: config_type in DescribeConfigs responses (v3+)
STRING_TYPE, INT_TYPE = 2, 3

# ClientQuotaFilterComponent: match_type in DescribeClientQuotas requests (exact name, default name, any name)
MATCH_TYPE_EXACT, MATCH_TYPE_DEFAULT, MATCH_TYPE_SPECIFIED = 0, 1, 2

# StreamsGroupHeartbeatResponse Status.StatusCode: the group coordinator asked for the group's internal topics
MISSING_INTERNAL_TOPICS = 3
