"""The topic and group quotas' findings of an explanation (``--topic``, ``--group``): each byte rate of the topic,
and the request rate of the group, asked about. Pure.

A topic quota is the topic's, not the client's: the finding says what the topic measures now against its entry (its
own, else ``<default>``) and the throttle a request writing or reading it now would be given, whoever sends it.
"""

from __future__ import annotations

import dataclasses

from quota.explain.client_quotas import byte_rate
from quota.explain.values import Finding
from quota.managers.request_rate import RequestRateQuotas
from quota.managers.topic_quota import TopicQuotas
from quota.primitives.entity import REQUEST_RATE


def topic_findings(topics: TopicQuotas, topic: str, shadow_mode: bool, now_ms: int) -> list[Finding]:
    """``producer_byte_rate`` and ``consumer_byte_rate`` of ``topic``: read, never made."""
    found = []
    for manager in (topics.produce, topics.fetch):
        finding = byte_rate(
            manager, f"topic {topic}", topics.table.matches(manager.quota_key, topic), shadow_mode, now_ms
        )
        # no precedence level: a topic has its own entry or <default>'s (the overridden list says which was passed)
        notes = finding.notes
        if manager is topics.produce and topics.table.rejects(topic):
            notes += (
                "on_exceed: reject: over the quota a write's partitions of the topic are refused "
                "(NOT_ENOUGH_REPLICAS, retriable), not throttled; the throttle shown is what a throttling entry would give",
            )
        found.append(dataclasses.replace(finding, level=None, level_path=None, notes=notes))
    return found


def partition_findings(topics: TopicQuotas, name: tuple[str, int], shadow_mode: bool, now_ms: int) -> list[Finding]:
    """``producer_byte_rate`` and ``consumer_byte_rate`` of one partition of a topic (its own entry, else its
    topic's ``partition: <default>``), beside the topic's own quotas: read, never made."""
    topic, index = name
    found = []
    for manager in (topics.partition_produce, topics.partition_fetch):
        candidates = topics.table.partition_matches(manager.quota_key, topic, str(index))
        finding = byte_rate(manager, f"partition {topic}/{index}", candidates, shadow_mode, now_ms)
        notes = finding.notes
        if manager is topics.partition_produce and manager.rejecting(name):
            notes += (
                "on_exceed: reject: over the quota a write to this partition is refused (NOT_ENOUGH_REPLICAS, "
                "retriable), not throttled; the throttle shown is what a throttling entry would give",
            )
        found.append(dataclasses.replace(finding, level=None, level_path=None, notes=notes))
    return found


def group_finding(requests: RequestRateQuotas, group: str, shadow_mode: bool, now_ms: int) -> Finding:
    """``request_rate`` of ``group``, whichever member sends its requests: read, never made."""
    candidates = requests.group_table.matches(REQUEST_RATE, group)
    finding = byte_rate(requests.groups, f"group {group}", candidates, shadow_mode, now_ms)
    return dataclasses.replace(finding, level=None, level_path=None)  # its own entry, or <default>'s
