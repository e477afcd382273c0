"""The ``quotas:`` list as a whole: each item goes to the parser of its entity's kind (user and client-id, or ip:
:mod:`config.quotas`; quota-group: :mod:`config.quota_groups`; topic: :mod:`config.topic_quotas`; group: :mod:`config.request_rate`), and every error of
every item is reported together."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from config.errors import ConfigError, collecting, raise_all
from config.quota_groups import parse_client_quotas
from config.request_rate import parse_group_quotas
from config.topic_quotas import parse_topic_quotas
from quota.primitives.group_quotas import GroupQuotaTable
from quota.primitives.quota_table import QuotaTable
from quota.primitives.topic_quotas import TopicQuotaTable


@dataclass(frozen=True, slots=True)
class QuotaEntries:
    clients: QuotaTable  # the user and client-id entities
    ip_rates: Mapping[str, float]  # {ip or <default>: connection_creation_rate}
    topics: TopicQuotaTable
    groups: GroupQuotaTable


def parse_quota_entries(raw: Any, path: str) -> QuotaEntries:
    """Every kind of entity of the ``quotas:`` list."""
    errors: list[ConfigError] = []
    section = collecting(errors, parse_client_quotas, raw, path)
    topics = collecting(errors, parse_topic_quotas, raw, path)
    groups = collecting(errors, parse_group_quotas, raw, path)
    raise_all(errors)
    clients, ip_rates = section
    return QuotaEntries(clients, ip_rates, topics, groups)
