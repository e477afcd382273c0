"""The request-rate quotas' configuration: which APIs count (``settings: quota.request.rate.apis``) and the
``quotas:`` section's group entities.

```yaml
settings:
  quota.request.rate.apis: JoinGroup,SyncGroup,OffsetCommit,Metadata,FindCoordinator,ListOffsets   # the default
quotas:
  - entity: {user: "<default>"}           # every user's requests of those APIs, all its client ids together
    request_rate: 50
  - entity: {group: "<default>"}          # every group's JoinGroup, SyncGroup, OffsetCommit, ... each on its own
    request_rate: 5
```

Heartbeat, LeaveGroup and the group heartbeats of KIP-848 and after can never be listed: a member throttled there
misses its session and is evicted (Redpanda learnt it with librdkafka, redpanda#10141), and leaving a group is
how a client gets out of a storm. Nor can the requests that set up a connection (ApiVersions, SASL).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from config.errors import ConfigError, show
from config.quotas import MIN_RATE, check_alone, is_group_item, named_entries
from quota.primitives.entity import DEFAULT, REQUEST_RATE, QuotaEntry
from quota.primitives.group_quotas import GROUP, GroupEntity, GroupQuotaTable

# The APIs a request_rate quota may count, by Kafka's name, with their keys (tests/config/test_request_rate_config.py
# holds them to the codec's table, proxy.codec.apis, which config/ may not import).
COUNTABLE_APIS: dict[str, int] = {
    "Produce": 0,
    "Fetch": 1,
    "ListOffsets": 2,
    "Metadata": 3,
    "OffsetCommit": 8,
    "OffsetFetch": 9,
    "FindCoordinator": 10,
    "JoinGroup": 11,
    "SyncGroup": 14,
    "DescribeGroups": 15,
    "ListGroups": 16,
    "CreateTopics": 19,
    "DeleteTopics": 20,
    "DeleteRecords": 21,
    "InitProducerId": 22,
    "OffsetForLeaderEpoch": 23,
    "AddPartitionsToTxn": 24,
    "AddOffsetsToTxn": 25,
    "EndTxn": 26,
    "TxnOffsetCommit": 28,
    "DescribeConfigs": 32,
    "AlterConfigs": 33,
    "CreatePartitions": 37,
    "DeleteGroups": 42,
    "IncrementalAlterConfigs": 44,
    "OffsetDelete": 47,
    "DescribeCluster": 60,
    "DescribeProducers": 61,
    "DescribeTransactions": 65,
    "ListTransactions": 66,
    "ConsumerGroupDescribe": 69,
    "DescribeTopicPartitions": 75,
}
# The APIs that may never be listed, and why (their keys: Heartbeat 12, LeaveGroup 13, SaslHandshake 17,
# ApiVersions 18, SaslAuthenticate 36, ConsumerGroupHeartbeat 68, ShareGroupHeartbeat 76, StreamsGroupHeartbeat 88).
_MEMBERSHIP = "a group member throttled there misses its session and is evicted, and cannot leave (redpanda#10141)"
_SETUP = "a client needs it to connect at all"
NEVER_COUNTED: dict[str, str] = {
    "Heartbeat": _MEMBERSHIP,
    "LeaveGroup": _MEMBERSHIP,
    "ConsumerGroupHeartbeat": _MEMBERSHIP + "; KIP-848 members join and leave with it",
    "ShareGroupHeartbeat": _MEMBERSHIP,
    "StreamsGroupHeartbeat": _MEMBERSHIP,
    "ApiVersions": _SETUP,
    "SaslHandshake": _SETUP,
    "SaslAuthenticate": _SETUP,
}
DEFAULT_APIS = ("JoinGroup", "SyncGroup", "OffsetCommit", "Metadata", "FindCoordinator", "ListOffsets")


def parse_request_rate_apis(raw: Any, key: str) -> tuple[str, ...]:
    """``quota.request.rate.apis``: Kafka API names, comma-separated (as a dynamic update writes it) or a YAML list;
    an empty list counts nothing. Each name checked: a name never counted is refused, saying why."""
    if isinstance(raw, str):
        names: Iterable[Any] = [part.strip() for part in raw.split(",") if part.strip()]
    elif isinstance(raw, list | tuple):
        names = raw
    else:
        raise ConfigError(key, f"expected API names, comma-separated or a list, got {show(raw)}")
    out: list[str] = []
    for name in names:
        if name in NEVER_COUNTED:
            raise ConfigError(key, f"{name} can never be counted by request_rate: {NEVER_COUNTED[name]}")
        if name not in COUNTABLE_APIS:
            raise ConfigError(
                key, f"{show(name)} is not an API request_rate counts (known: {', '.join(COUNTABLE_APIS)})"
            )
        if name not in out:
            out.append(name)
    return tuple(out)


def api_keys(names: Iterable[str]) -> frozenset[int]:
    """The API keys of checked names (:func:`parse_request_rate_apis`)."""
    return frozenset(COUNTABLE_APIS[name] for name in names)


def parse_group_quotas(raw: Any, path: str) -> GroupQuotaTable:
    """The group entries of the ``quotas:`` list (the other items are others'), every error reported."""
    if not isinstance(raw, list):
        return GroupQuotaTable()  # config.quotas reports it
    return GroupQuotaTable(named_entries(raw, path, GROUP, is_group_item, parse_group_item))


def parse_group_item(item: dict, where: str) -> QuotaEntry:
    """One ``{group: ...}`` item: a group id or ``<default>``, alone, with ``request_rate`` (and ``mode``)."""
    entity = item["entity"]
    check_alone(entity, GROUP, where, f"a {GROUP} entity", ": a group quota counts every member's requests")
    name = entity[GROUP]
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}.entity.{GROUP}", f'expected a group id or "{DEFAULT}", got {show(name)}')
    mode = item.get("mode", "enforce")
    if mode not in ("enforce", "shadow"):
        raise ConfigError(f"{where}.mode", f"expected enforce or shadow, got {mode!r}")
    keys = [key for key in item if key not in ("entity", "mode")]
    wrong = next((key for key in keys if key != REQUEST_RATE), None)
    if wrong is not None:
        raise ConfigError(f"{where}.{wrong}", f"not a key of {GROUP} entities (known: {REQUEST_RATE})")
    if not keys:
        raise ConfigError(where, f"no quota key given (a {GROUP} entity takes {REQUEST_RATE})")
    value = item[REQUEST_RATE]
    if isinstance(value, bool) or not isinstance(value, int | float) or not MIN_RATE <= value < math.inf:
        raise ConfigError(
            f"{where}.{REQUEST_RATE}",
            f"expected a rate in requests per second > 0 (finite, at least {MIN_RATE:g}), got {value!r}",
        )
    return QuotaEntry(GroupEntity.of(name), {REQUEST_RATE: value}, mode == "shadow")
