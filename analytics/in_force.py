"""The quotas in force, as the planner compares its table with them: read from the proxy's configuration
(``--proxy-config``, its ``quotas:`` section, checked by the proxy's own parser) and from a running proxy
(``--bootstrap``: DescribeClientQuotas, the configuration with the config topic's entries over it), each key with
where it came from. The window settings of ``--proxy-config`` and the flags are said the same way
(:func:`window_sources`).

The proxy's own answer is the table in force when given: a key it shows that the file does not hold (or holds with
another value) comes from the config topic (``configs --alter``), and ``configs --delete-config`` removes it; a
key the file holds is removed by editing the file.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from analytics import group_table
from analytics.recommend import CONNECTION_CREATION_RATE, WINDOWS, entity_id
from quota.primitives.entity import DEFAULT
from quota.primitives.quota_groups import MEMBER_KEYS, QUOTA_GROUP
from quota.primitives.quota_table import QuotaTable

CLIENT_PARTS = {"user", "client-id"}  # a client entity's parts (the others: ip, topic, partition, group)
FILE, TOPIC = "file", "topic"  # where a key in force is set: the proxy's configuration file, or the config topic
PLANNED_KEYS = (
    "producer_byte_rate",
    "consumer_byte_rate",
    "controller_mutation_rate",
    "producer_ids_rate",
    CONNECTION_CREATION_RATE,
    "request_rate",
)


@dataclass(frozen=True)
class InForce:
    """``items``: the table in force, in the ``quotas:`` format (only the keys the planner recommends);
    ``origins``: ``{(entity_id, key): FILE or TOPIC}``; ``source``: where it was read, in words."""

    items: tuple[dict, ...]
    origins: Mapping[tuple[tuple, str], str] = field(default_factory=dict)
    source: str = ""
    file: str | None = None  # the configuration file, where a key set there is removed
    shadow: frozenset[tuple] = frozenset()  # entity ids of the entries in shadow mode (``mode: shadow``): none held
    members: Mapping[tuple, Mapping] = field(default_factory=dict)  # a quota group's entity id: its members' keys

    def replayed(self) -> list[dict]:
        """The items as the replay reads them: a shadow entry with ``mode: shadow`` (the tenants it governs are
        held by nobody), a quota group with its members (the replay resolves them to it)."""
        out = []
        for it in self.items:
            eid = entity_id(it["entity"])
            out.append({**it, **self.members.get(eid, {}), **({"mode": "shadow"} if eid in self.shadow else {})})
        return out

    def value(self, entity: Mapping[str, str], key: str) -> float | None:
        for item in self.items:
            if item["entity"] == dict(entity):
                return item.get(key)
        return None


def planned_only(items: Iterable[Mapping]) -> list[dict]:
    """The items with only the keys the planner recommends (``mode``, ``request_percentage`` and the like left out);
    an item left with none dropped."""
    out = []
    for item in items:
        kept = {k: v for k, v in item.items() if k in PLANNED_KEYS}
        if kept:
            out.append({"entity": as_planned(item["entity"]), **kept})
    return out


def as_planned(entity: Mapping) -> dict:
    """``entity`` as the planner writes it: a partition's index a number (``{topic: orders, partition: 3}``),
    however the file or DescribeClientQuotas gave it (``"3"``)."""
    out = dict(entity)
    if isinstance(out.get("partition"), str) and out["partition"].isdigit():
        out["partition"] = int(out["partition"])
    return out


def from_file(path: str, items: Sequence[Mapping]) -> InForce:
    """The file's ``quotas:`` items (:func:`config.loader.load_settings_and_quotas`, checked there); those with
    ``mode: shadow`` in shadow mode."""
    found = planned_only(items)
    origins = {(entity_id(it["entity"]), k): FILE for it in found for k in it if k != "entity"}
    shadow = frozenset(
        entity_id(as_planned(it["entity"])) for it in items if it.get("mode") == "shadow" and "ip" not in it["entity"]
    )
    members = {
        entity_id(it["entity"]): {k: v for k, v in it.items() if k in MEMBER_KEYS}
        for it in items
        if QUOTA_GROUP in it["entity"]
    }
    return InForce(tuple(found), origins, f"--proxy-config {path}", path, shadow, members)


def with_described(
    file: InForce | None, described: Iterable[tuple[Mapping[str, str], Mapping[str, float]]], bootstrap: str
) -> InForce:
    """The proxy's answer (DescribeClientQuotas: ``(entity, {key: value})``) as the table in force; a key the file
    holds with the same value is the file's, any other the config topic's. The file's quota groups are in force as
    the file sets them: the proxy lists none (Kafka's entity model has no group), and the config topic sets none."""
    items = planned_only({"entity": _in_kafkas_order(entity), **values} for entity, values in described)
    origins = {}
    for it in items:
        for key, value in it.items():
            if key == "entity":
                continue
            was = file.value(it["entity"], key) if file is not None else None
            same = was is not None and math.isclose(was, value)
            origins[(entity_id(it["entity"]), key)] = FILE if same else TOPIC
    groups = [dict(it) for it in (file.items if file is not None else ()) if QUOTA_GROUP in it["entity"]]
    origins.update({(entity_id(it["entity"]), key): FILE for it in groups for key in it if key != "entity"})
    items += groups
    source = f"DescribeClientQuotas through {bootstrap}"
    if file is not None:
        source += f" (keys also in {file.file} read as set there)"
    # DescribeClientQuotas carries no mode: an entry's is the file's (a config topic entry may say otherwise)
    shadow = frozenset(entity_id(it["entity"]) for it in items) & file.shadow if file is not None else frozenset()
    members = file.members if file is not None else {}
    return InForce(tuple(items), origins, source, file.file if file is not None else None, shadow, members)


def _in_kafkas_order(entity: Mapping[str, str]) -> dict[str, str]:
    """``entity`` with its parts as the planner writes them (user, client-id; ip), whatever order the answer had."""
    order = ("user", "client-id", "ip")
    return dict(sorted(entity.items(), key=lambda part: order.index(part[0]) if part[0] in order else len(order)))


def describe(bootstrap: str, security: Mapping[str, str] | None = None) -> list[tuple[dict, dict]]:
    """Every client-quota entity the proxy at ``bootstrap`` has in force, with the ``configs`` command's own admin
    requests (kafka-python); raises :class:`proxy.cli.quota_admin.Failed` with what went wrong."""
    from proxy.cli.quota_admin import QuotaAdmin

    with QuotaAdmin(bootstrap, dict(security or {})) as admin:
        return admin.describe_quotas({}, strict=False)  # no component: every entity (Kafka's rule, the proxy's)


def window_sources(args_given: Mapping[str, str], file: str | None, file_keys: Iterable[str]) -> dict[str, str]:
    """Where each window setting comes from: ``{setting: "--quota-window-s" | "--proxy-config FILE" | "the proxy's
    default"}``; ``args_given``: Rules field -> its flag, for the flags given; ``file_keys``: the settings the file
    sets."""
    in_file = set(file_keys)
    out = {}
    for name, setting in WINDOWS.items():
        if name in args_given:
            out[setting] = args_given[name]
        elif file is not None and setting in in_file:
            out[setting] = f"--proxy-config {file}"
        else:
            out[setting] = "the proxy's default"
    return out


def quota_table(items: Iterable[Mapping]) -> QuotaTable:
    """The user and client-id keys of ``items`` as the proxy's table (Kafka's eight levels resolve it), with the
    quota groups among them that name their members (:mod:`analytics.group_table`)."""
    items = list(items)
    values = []
    for item in items:
        quotas = {k: v for k, v in item.items() if k not in ("entity", CONNECTION_CREATION_RATE)}
        if set(item["entity"]) <= CLIENT_PARTS and quotas:
            values.append((item["entity"], quotas))
    return group_table.with_groups(QuotaTable.from_values(values), items)


def ip_limit(items: Iterable[Mapping], ip: str) -> float | None:
    """The ``connection_creation_rate`` of ``ip`` in ``items``: its own entry's, else ``ip: <default>``'s."""
    rates = {it["entity"]["ip"]: it[CONNECTION_CREATION_RATE] for it in items if "ip" in it["entity"]}
    return rates.get(ip, rates.get(DEFAULT))


def limit_for(items: Sequence[Mapping], entity: Mapping[str, str], key: str) -> float | None:
    """The limit ``items`` give ``entity`` for ``key``, as the proxy resolves it; None: unlimited."""
    if "ip" in entity:
        return ip_limit(items, entity["ip"]) if key == CONNECTION_CREATION_RATE else None
    if "partition" in entity:  # its own entry, else its topic's partition: <default> entry's
        topic = [it for it in items if "partition" in it["entity"] and it["entity"]["topic"] == entity["topic"]]
        by_index = {str(it["entity"]["partition"]): it.get(key) for it in topic}
        own = by_index.get(str(entity["partition"]))
        return own if own is not None else by_index.get(DEFAULT)
    if not set(entity) <= CLIENT_PARTS:  # a topic or a group: its own entry, else <default>'s
        (kind, name), *_ = entity.items()
        found = {it["entity"][kind]: it.get(key) for it in items if tuple(it["entity"]) == (kind,)}
        own = found.get(name)
        return own if own is not None else found.get(DEFAULT)
    resolved = quota_table(items).resolve(key, entity.get("user", ""), entity.get("client-id", ""))
    return None if resolved.unlimited else resolved.limit
