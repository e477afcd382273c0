"""From usage statistics to recommended quotas: the rule, the YAML and the commands. Pure Python, no Spark.

The rule, per quota key (all rates measured per interval of the usage log, percentiles over the intervals in which
the entity appears in the log):

    recommended = round_up(p99 rate x headroom)                         (headroom 1.5 by default)

rounded *up* to two significant digits (148,500 B/s -> 150,000; 0.913 -> 0.92). Byte rates are integers in bytes/s,
the other keys floats. Where a key is a token bucket that allows bursts (KIP-599's ``controller_mutation_rate``, and
KIP-936's ``producer_ids_rate``, which the proxy enforces the same way), the bucket must also hold the entity's
largest burst of one interval (or its p99 burst, ``burst="p99"``) without a throttle. KIP-599's bucket holds
``B = rate x samples x window`` (``controller.quota.window.num``, 11, x ``controller.quota.window.size.seconds``, 1 s),
so::

    controller_mutation_rate = round_up(max(p99 rate x headroom, max_burst / (samples x window)))

``producer_ids_rate`` counts new producer ids per ``producer.id.quota.window.size.seconds`` W (3600 s by default) and
only on user entities (KIP-936; the proxy rejects it next to a client-id), so it is recommended per user, from that
user's new producer ids over all its client ids: ``max(p99 rate/s x W x headroom, max_burst / window.num)``.

**A tenant the throttle held** (``held_intervals > 0`` with the quota in force known, ``quota_rate``) is
*constrained by the current quota*: its rates are what the quota let through, not what it needed, so the
recommendation rests on its estimated demand (:mod:`analytics.demand`, ``request_demand``/``response_demand``)::

    recommended = min(round_up(max(estimated demand, p99 rate) x headroom), round_up(max_raise x quota))

and when the demand cannot be measured (held through nearly every throttled interval) on the quota in force:
``round_up(max(quota, p99 rate) x headroom)``, said as such. A per-interval burst is never the basis: byte rates are
on the quota's own clock (Kafka's sampled window), see :mod:`analytics.stats`.

Keys an entity never used (no Produce bytes, no Fetch bytes, no partition mutation, no new producer id, no
connection) are left out, so they stay unlimited rather than being set to zero.
"""

from __future__ import annotations

import shlex
import textwrap
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal

import yaml

from config.request_rate import DEFAULT_APIS
from quota.primitives.entity import DEFAULT  # the entity name of Kafka's default quotas: <default>

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
PRODUCER_IDS_RATE = "producer_ids_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"
MIN_RATE = 0.001  # the smallest rate the proxy's config accepts


@dataclass(frozen=True)
class Rules:
    headroom: float = 1.5
    burst: str = "max"  # "max" or "p99": which one-interval burst the bucket must hold
    max_raise: float = 4.0  # a constrained tenant's advice: at most this x the quota in force
    offender_mads: float = 4.0  # MADs above its fleet's median (log scale) that make an offender (analytics.outliers)
    # The proxy's window settings (whole numbers, as the proxy and Kafka take them; analytics.cli reads them from
    # the proxy's configuration with --proxy-config):
    quota_window_num: int = 11  # quota.window.num: the byte rates' sampled window ...
    quota_window_s: int = 1  # ... of quota.window.size.seconds each
    controller_window_num: int = 11  # controller.quota.window.num
    controller_window_s: int = 1  # controller.quota.window.size.seconds
    producer_id_window_num: int = 11  # producer.id.quota.window.num
    producer_id_window_s: int = 3600  # producer.id.quota.window.size.seconds
    request_rate_apis: tuple[str, ...] = DEFAULT_APIS  # quota.request.rate.apis: the requests request_rate counts

    def __post_init__(self) -> None:
        if not self.headroom > 0:
            raise ValueError(f"headroom must be > 0, got {self.headroom}")
        if self.burst not in ("max", "p99"):
            raise ValueError(f"burst must be 'max' or 'p99', got {self.burst!r}")
        if not self.max_raise >= 1:
            raise ValueError(f"max-raise must be >= 1, got {self.max_raise}")
        if not self.offender_mads > 0:
            raise ValueError(f"offender-mads must be > 0, got {self.offender_mads}")
        for name in WINDOWS:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name.replace('_', '-')} must be a whole number >= 1, got {value!r}")


# Rules' window fields, by the proxy's setting each stands for (settings: in the proxy's configuration)
WINDOWS = {
    "quota_window_num": "quota.window.num",
    "quota_window_s": "quota.window.size.seconds",
    "controller_window_num": "controller.quota.window.num",
    "controller_window_s": "controller.quota.window.size.seconds",
    "producer_id_window_num": "producer.id.quota.window.num",
    "producer_id_window_s": "producer.id.quota.window.size.seconds",
}


def round_up(x: float, digits: int = 2) -> float:
    """``x`` rounded up to ``digits`` significant digits: 148500 -> 150000, 0.9134 -> 0.92, 0 -> 0."""
    if not x > 0:
        return 0.0
    exact = Decimal(f"{x:.12g}")  # float noise (5.4000000000000004) must not round 5.4 up to 5.5
    step = Decimal(1).scaleb(exact.adjusted() - (digits - 1))
    return float((exact / step).to_integral_value(rounding=ROUND_CEILING) * step)


def byte_rate(p99: float | None, rules: Rules) -> int | None:
    if not p99:
        return None
    return max(1, int(round_up(p99 * rules.headroom)))


def bucket_rate(p99_per_s: float, burst: float, window_num: float, rate_scale: float, rules: Rules) -> float | None:
    """A rate whose bucket (``rate x window_num``, in the rate's own units) holds ``burst``."""
    if not (p99_per_s or burst):
        return None
    return max(MIN_RATE, round_up(max(p99_per_s * rate_scale * rules.headroom, burst / window_num)))


def _burst(row: Mapping, prefix: str, rules: Rules) -> float:
    return row.get(f"{prefix}_{rules.burst}_interval") or 0


def constrained(row: Mapping) -> bool:
    """The entity was held by a byte-rate quota in force (its rates are censored by it)."""
    return bool(row.get("held_intervals")) and bool(row.get("quota_rate"))


def byte_rate_basis(row: Mapping, side: str, rules: Rules) -> tuple[int | None, str]:
    """The byte rate recommended from one ``entity_stats`` row (``side``: ``request`` for Produce, ``response`` for
    Fetch) and what it rests on, in words."""
    p99 = row[f"{side}_rate_p99"] or 0.0
    windows = row.get("intervals") or 0
    if not constrained(row):
        return byte_rate(p99, rules), f"p99 {p99:,.0f} B/s over {windows} intervals on the quota's window"
    quota, share = row["quota_rate"], row.get("held_share") or 0.0
    demand = row.get(f"{side}_demand")
    held = (
        f"constrained by the current quota {quota:,.0f} B/s (held {share:.0%} of the time, in "
        f"{row['held_intervals']} of {windows} intervals)"
    )
    if demand:
        value = byte_rate(max(demand, p99), rules)
        cap = max(1, int(round_up(quota * rules.max_raise)))
        if value is not None and value > cap:  # not None: demand > 0
            return cap, (
                f"{held}; estimated demand {demand:,.0f} B/s (its pace while free: a client that catches up "
                f"a backlog after each hold shows its catch-up rate); capped at {rules.max_raise:g} x the "
                f"current quota: raise in steps and watch the held share"
            )
        return value, f"{held}; estimated demand {demand:,.0f} B/s"
    return (
        byte_rate(max(quota, p99), rules),
        f"{held}; demand not measurable (held through every throttled interval): on the quota in force, "
        f"raise it and watch the held share",
    )


def _bucket_basis(
    p99_per_s: float, burst: float, window_num: float, rate_scale: float, rules: Rules, what: str, bucket: str
) -> tuple[float | None, str]:
    """:func:`bucket_rate` and what it rests on, in words: ``what`` is counted, the bucket holds ``bucket`` of the
    rate (``11 samples of 1 s``)."""
    rate = bucket_rate(p99_per_s, burst, window_num, rate_scale, rules)
    steady, needed = p99_per_s * rate_scale * rules.headroom, burst / window_num
    per = "/s" if rate_scale == 1 else f"/s x {rate_scale:g} s"
    return rate, (
        f"p99 {figure_text(p99_per_s)} {what}{per} x headroom {rules.headroom:g} = {figure_text(steady)}; the bucket holds "
        f"{bucket} of the rate, so the {rules.burst} one-interval burst of {figure_text(burst)} {what} needs "
        f"{figure_text(needed)}: "
        f"{'the burst' if needed > steady else 'the p99'} decides"
    )


def figure_text(x: float) -> str:
    """A figure as a comment says it: ``10,800``, ``120``, ``5``, ``0.0909``."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def mutation_basis(total: Mapping, rules: Rules) -> tuple[float | None, str]:
    """``controller_mutation_rate`` from an entity's all-APIs row (KIP-599's bucket), and what it rests on."""
    num, size = rules.controller_window_num, rules.controller_window_s
    return _bucket_basis(
        total["mutation_rate_p99"] or 0,
        _burst(total, "mutations", rules),
        num * size,
        1.0,
        rules,
        "partition mutations",
        f"{num} samples of {size} s",
    )


def producer_ids_basis(user: Mapping, rules: Rules) -> tuple[float | None, str]:
    """``producer_ids_rate`` from a user's row (KIP-936: new producer ids per window W), and what it rests on."""
    return _bucket_basis(
        user["new_pid_rate_p99"] or 0,
        _burst(user, "new_pids", rules),
        rules.producer_id_window_num,
        rules.producer_id_window_s,
        rules,
        "new producer ids",
        f"{rules.producer_id_window_num} windows",
    )


def connection_basis(ip: Mapping, rules: Rules) -> tuple[float | None, str]:
    """``connection_creation_rate`` from an IP's row, and what it rests on."""
    p99, peak = ip["connection_rate_p99"] or 0, ip["connection_rate_max"] or 0
    if not p99 and not peak:
        return None, ""
    value = max(MIN_RATE, round_up(p99 * rules.headroom))
    return value, (
        f"p99 {figure_text(p99)} connections/s over {ip.get('intervals') or 0} intervals in which it opened "
        f"connections (peak {figure_text(peak)}/s in one interval) x headroom {rules.headroom:g}"
    )


def _recommendations(
    entity_rows: Iterable[Mapping], user_rows: Iterable[Mapping], ip_rows: Iterable[Mapping], rules: Rules
) -> Iterator[tuple[dict, str, float, str]]:
    """``(entity, key, value, what it rests on)`` for every key recommended."""
    by_entity: dict[tuple, dict] = {}
    for row in entity_rows:
        if row["user"] is None and row["client_id"] is None:
            continue
        by_entity.setdefault((row["user"], row["client_id"]), {})[row["api"]] = row
    for (user, client_id), apis in by_entity.items():
        entity = entity_key(user, client_id)
        for api, key, side in (("Produce", PRODUCER_BYTE_RATE, "request"), ("Fetch", CONSUMER_BYTE_RATE, "response")):
            if api in apis:
                value, text = byte_rate_basis(apis[api], side, rules)
                if value:
                    yield entity, key, value, text
        if "*" in apis:
            rate, text = mutation_basis(apis["*"], rules)
            if rate:
                yield entity, CONTROLLER_MUTATION_RATE, rate, text
    for row in user_rows:
        if row["user"] is not None:
            rate, text = producer_ids_basis(row, rules)
            if rate:
                yield {"user": row["user"]}, PRODUCER_IDS_RATE, rate, text
    for row in ip_rows:
        if row["ip"] is not None:
            rate, text = connection_basis(row, rules)
            if rate:
                yield {"ip": row["ip"]}, CONNECTION_CREATION_RATE, rate, text


def entity_id(entity: Mapping) -> tuple:
    """A hashable key of an ``entity:`` mapping (the same entity whatever the order of its keys)."""
    return tuple(sorted(entity.items()))


def entity_key(user: str | None, client_id: str | None) -> dict:
    """The ``entity:`` mapping; a null user or client id is left out."""
    entity = {}
    if user is not None:
        entity["user"] = user
    if client_id is not None:
        entity["client-id"] = client_id
    return entity


def build_quotas(
    entity_rows: Iterable[Mapping], user_rows: Iterable[Mapping], ip_rows: Iterable[Mapping], rules: Rules = Rules()
) -> list[dict]:
    """The ``quotas:`` list: one item per (user, client-id), per user (producer ids) and per IP, sorted by entity."""
    by_entity: dict[tuple, dict] = {}
    for entity, key, value, _ in _recommendations(entity_rows, user_rows, ip_rows, rules):
        by_entity.setdefault(entity_id(entity), {"entity": entity})[key] = value  # one item per entity
    return sorted_items(by_entity.values())


_ORDER = {"user": 0, "client-id": 1, "ip": 2, "topic": 3, "partition": 4, "group": 5, "quota-group": 6}


def sorted_items(items: Iterable[dict]) -> list[dict]:
    """Items by entity type (users, clients, IPs, topics, groups), then by name."""
    return sorted(
        items,
        key=lambda it: (sorted(_ORDER[k] for k in it["entity"]), sorted((k, str(v)) for k, v in it["entity"].items())),
    )


def bases(
    entity_rows: Iterable[Mapping],
    user_rows: Iterable[Mapping] = (),
    ip_rows: Iterable[Mapping] = (),
    rules: Rules = Rules(),
) -> dict[tuple, dict[str, str]]:
    """What each recommendation rests on: ``{entity_id(entity): {key: text}}``."""
    out: dict[tuple, dict[str, str]] = {}
    for entity, key, _, text in _recommendations(entity_rows, user_rows, ip_rows, rules):
        out.setdefault(entity_id(entity), {})[key] = text
    return out


def comments(lines: Iterable[str]) -> str:
    """``# `` lines, wrapped at 116 characters."""
    return "".join(f"# {part}\n" for line in lines for part in textwrap.wrap(line, 114))


def to_yaml(
    items: list[dict],
    rules: Rules,
    source: str = "",
    scope_lines: Iterable[str] = (),
    basis: Mapping[tuple, Mapping[str, str]] | None = None,
) -> str:
    """The ``quotas:`` block, its header saying the rule, the source and (``scope_lines``) which quota.scope the
    figures are for; with ``basis`` (:func:`bases`), each key's comment saying what it rests on just above it."""
    header = (
        f"# Recommended quotas: p99 rate x headroom {rules.headroom:g}, rounded up to two significant digits;\n"
        f"# controller_mutation_rate and producer_ids_rate also hold the {rules.burst} one-interval burst\n"
        f"# (controller window {rules.controller_window_num} x {rules.controller_window_s:g} s; producer ids per "
        f"{rules.producer_id_window_s:g} s, {rules.producer_id_window_num} windows).\n"
    )
    if source:
        header += f"# From: {source}\n"
    header += comments(scope_lines)
    if not items:
        return header + "quotas: []\n"
    said = basis or {}
    return header + "quotas:\n" + "".join(_item_yaml(item, said.get(entity_id(item["entity"]), {})) for item in items)


def _item_yaml(item: Mapping, said: Mapping[str, str]) -> str:
    """One item of the list, each key's comment (``said``) on the lines just above that key, inside the item::

    - entity: {user: alice, client-id: etl}
      # p99 99,000 B/s over 60 intervals on the quota's window
      producer_byte_rate: 150000
    """
    out = ""
    for i, (key, value) in enumerate(item.items()):
        if key in said:
            out += "".join(f"    # {part}\n" for part in textwrap.wrap(said[key], 110))
        flow = None if isinstance(value, Mapping | list) else False  # the entity and members in flow style
        line = yaml.safe_dump({key: value}, sort_keys=False, default_flow_style=flow, width=10_000)
        out += ("  - " if i == 0 else "    ") + line
    return out


_ENTITY_TYPES: tuple[tuple[str, str], ...] = (("user", "users"), ("client-id", "clients"), ("ip", "ips"))
_ENTITY_TYPES += (("topic", "topics"), ("partition", "partitions"), ("group", "groups"))  # a partition after its topic


BOOTSTRAP = "HOST:PORT"  # replaced by the operator with the proxy's (or the cluster's) bootstrap address


def to_command(item: Mapping, bootstrap: str = BOOTSTRAP, deleted: Sequence[str] = ()) -> str:
    """``kafka-quota-proxy configs --bootstrap-server HOST:PORT --alter --entity-type users --entity-name alice ...
    --add-config k=v,...`` (and ``--delete-config k,...`` for the ``deleted`` keys)"""
    parts = ["kafka-quota-proxy", "configs", "--bootstrap-server", bootstrap, "--alter"]
    for key, entity_type in _ENTITY_TYPES:
        if key in item["entity"]:
            name = item["entity"][key]  # <default>: kafka-configs' --entity-default
            named = ["--entity-default"] if name == DEFAULT else ["--entity-name", shlex.quote(str(name))]
            parts += ["--entity-type", entity_type, *named]
    configs = ",".join(f"{k}={v}" for k, v in item.items() if k != "entity")
    if configs:
        parts += ["--add-config", configs]
    if deleted:
        parts += ["--delete-config", ",".join(deleted)]
    return " ".join(parts)


OUTLIER_MARKS = ("offender:", "outlier kept:")  # how an outlier's comment starts (analytics.outliers) ...
OWN_BASIS = ". Its own figure rests on: "  # ... and where what its own figure rests on follows


def to_commands(
    items: Iterable[Mapping], scope_lines: Iterable[str] = (), basis: Mapping[tuple, Mapping[str, str]] | None = None
) -> str:
    """One command per line, after ``# `` lines saying which quota.scope the figures are for; an outlier's command
    (``basis``: its comment starts with :data:`OUTLIER_MARKS`) after a ``# `` line with the evidence."""
    said = basis or {}
    out = comments(scope_lines)
    for it in items:
        marks = [
            f"{key}: {text.split(OWN_BASIS)[0]}"
            for key, text in said.get(entity_id(it["entity"]), {}).items()
            if key in it and text.startswith(OUTLIER_MARKS)
        ]
        out += comments(marks) + (
            to_command(it) + "\n" if "quota-group" not in it["entity"] else comments([file_only(it)])
        )
    return out


def file_only(item: Mapping, file: str | None = None) -> str:
    """What to do for a quota group's entry: the config topic refuses ``quota-group`` entities (YAML only)."""
    keys = ", ".join(f"{k}: {v}" for k, v in item.items() if k != "entity")
    return f"edit {file or 'the proxy configuration'}: the entry of {{quota-group: {item['entity']['quota-group']}}} to {keys} (quota groups are set in the file only)"
