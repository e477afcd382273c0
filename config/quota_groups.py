"""The ``quotas:`` section's quota groups: one budget shared by several users, several client ids, or every client id
under a prefix (:mod:`quota.primitives.quota_groups`; not a consumer group, which is ``{group: NAME}``).

```yaml
quotas:
  - entity: {quota-group: etl-team}
    users: [alice, bob]                  # every client of alice and bob together
    producer_byte_rate: 10485760
  - entity: {quota-group: batch-jobs}
    client-id-prefix: "job-"             # every client id starting with job- (and/or client-ids: [a, b])
    consumer_byte_rate: 20971520
    request_rate: 50
```

A group takes the keys a user or client-id entity takes (``producer_ids_rate`` only for a group of users, as
KIP-936 keys it by user) and ``mode``. Only the YAML says who is in a group: Kafka's entity model (the config topic,
AlterClientQuotas) names one entity per quota, with no list of members.
"""

from __future__ import annotations

from typing import Any

from config.errors import ConfigError, collecting, raise_all
from config.quotas import is_quota_group_item, parse_quota_item, parse_quota_section
from quota.primitives.entity import CLIENT_ID, DEFAULT, PRODUCER_IDS_RATE, USER, QuotaEntity, QuotaEntry
from quota.primitives.quota_groups import (
    CLIENT_ID_PREFIX,
    CLIENT_IDS,
    GROUP_MARK,
    MEMBER_KEYS,
    QUOTA_GROUP,
    USERS,
    QuotaGroups,
    quota_group,
)
from quota.primitives.quota_table import QuotaTable


def parse_client_quotas(raw: Any, path: str) -> tuple[QuotaTable, dict[str, float]]:
    """The user/client-id quota table with its quota groups, and the IP rates; every error of every item together."""
    errors: list[ConfigError] = []
    section = collecting(errors, parse_quota_section, raw, path)
    groups = collecting(errors, parse_quota_groups, raw, path)
    raise_all(errors)
    table, ip_rates = section
    return (table.with_groups(groups) if len(groups) else table), ip_rates


def parse_quota_groups(raw: Any, path: str) -> QuotaGroups:
    """The quota-group items of the ``quotas:`` list; a name in two groups is an error naming both."""
    if not isinstance(raw, list):
        return QuotaGroups()  # config.quotas reports it
    entries: list[QuotaEntry] = []
    errors: list[ConfigError] = []
    where_of: dict[str, str] = {}
    for i, item in enumerate(raw):
        if is_quota_group_item(item):
            entry = collecting(errors, parse_quota_group_item, item, f"{path}[{i}]")
            if entry is not None:
                entries.append(entry)
                where_of[entry.entity.path] = f"{path}[{i}]"  # the last: the one found in conflict
    raise_all(errors)
    try:
        return QuotaGroups(entries)
    except ValueError as exc:  # "/quota-groups/b: ... already in /quota-groups/a": at the item of b
        first = str(exc).split(":", 1)[0]
        raise ConfigError(where_of.get(first, path), str(exc)) from None


def parse_quota_group_item(item: dict, where: str) -> QuotaEntry:
    """One ``{quota-group: NAME}`` item: its name, its members (``users``, or ``client-ids`` and/or
    ``client-id-prefix``), and quota keys checked as a user's or a client id's are."""
    entity = item["entity"]
    others = [key for key in entity if key != QUOTA_GROUP]
    if others:
        raise ConfigError(
            f"{where}.entity.{others[0]}",
            f"a {QUOTA_GROUP} cannot be combined with {others[0]}: name its members with {', '.join(MEMBER_KEYS)}",
        )
    name = entity[QUOTA_GROUP]
    if not isinstance(name, str) or not name or name == DEFAULT or GROUP_MARK in name:
        raise ConfigError(f"{where}.entity.{QUOTA_GROUP}", f"expected a name for the group, got {name!r}")
    users = _names(item, USERS, where)
    client_ids = _names(item, CLIENT_IDS, where)
    prefix = item.get(CLIENT_ID_PREFIX)
    if prefix is not None and (not isinstance(prefix, str) or not prefix or GROUP_MARK in prefix):
        raise ConfigError(
            f"{where}.{CLIENT_ID_PREFIX}",
            f'expected the start of client ids, not empty (every client id: use {{client-id: "{DEFAULT}"}}), '
            f"got {prefix!r}",
        )
    if users and (client_ids or prefix is not None):
        raise ConfigError(
            f"{where}.{USERS}", f"a group has {USERS}, or {CLIENT_IDS} and/or {CLIENT_ID_PREFIX}, not both kinds"
        )
    if not (users or client_ids or prefix):
        raise ConfigError(where, f"a {QUOTA_GROUP} needs members: {', '.join(MEMBER_KEYS)}")
    if not users and PRODUCER_IDS_RATE in item:
        raise ConfigError(f"{where}.{PRODUCER_IDS_RATE}", f"only for a group of {USERS} (KIP-936 counts per user)")
    # The quota keys and mode are checked as those of a user (or client-id) entity would be, at their own paths.
    as_entity = {USER: "group"} if users else {CLIENT_ID: "group"}
    keys = {key: value for key, value in item.items() if key not in (*MEMBER_KEYS, "entity")}
    checked = parse_quota_item({**keys, "entity": as_entity}, where)
    assert isinstance(checked, QuotaEntry)  # not an IP entity
    return quota_group(
        name, dict(checked.quotas), users=users, client_ids=client_ids, client_id_prefix=prefix, shadow=checked.shadow
    )


def _names(item: dict, key: str, where: str) -> list[str]:
    """A list of member names (empty when absent); each a name of its own, none twice."""
    if key not in item:
        return []
    names = item[key]
    if not isinstance(names, list) or not names:
        raise ConfigError(f"{where}.{key}", f"expected a list of names, got {names!r}")
    seen: set[str] = set()
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name or name == DEFAULT or GROUP_MARK in name:
            raise ConfigError(f"{where}.{key}[{i}]", f"expected a name (not {DEFAULT}), got {name!r}")
        if name in seen:
            raise ConfigError(f"{where}.{key}[{i}]", f"{name} is listed twice")
        seen.add(name)
    return names


def quota_group_warnings(table: QuotaTable) -> list[str]:
    """What ``check-config`` and the start-up warn of: a key of a group of client ids that a ``<default>`` user entry
    also sets never applies to the group (every user level beats every client-id level, as in Kafka)."""
    warnings = []
    defaults = [table.entry(QuotaEntity(DEFAULT)), table.entry(QuotaEntity(DEFAULT, DEFAULT))]
    for group in table.groups.entries:
        if group.by_user:
            continue
        for entry in defaults:
            shadowed = sorted(key for key in group.quotas if entry is not None and key in entry.quotas)
            if entry is not None and shadowed:
                warnings.append(
                    f"quotas: {group.entity.path} ({group.members()}): its {', '.join(shadowed)} never applies: "
                    f"{entry.entity.path} sets it, and every user level comes before a group of client ids (Kafka's "
                    "order); make it a group of users, or take the key off that entry"
                )
    return warnings
