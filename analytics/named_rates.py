"""Recommendations for the quotas of issue 47 from the ``named_stats`` rows (:mod:`analytics.named_stats`): a topic's
``producer_byte_rate`` and ``consumer_byte_rate`` (``{topic: NAME}``), a partition's (``{topic: NAME, partition: N}``),
and ``request_rate`` per client entity
(``{user, client-id}``) and per consumer group (``{group: NAME}``). Pure Python, no Spark.

The rule is the byte rates' (:mod:`analytics.recommend`): p99 rate on the quota's window x headroom, rounded up to
two significant digits; a topic's byte rates are integers in bytes/s, a request rate a float in requests/s and at
least :data:`MIN_REQUEST_RATE`: a client starting up sends a handful of Metadata and FindCoordinator requests at
once, and a request rate holds it (and mutes its connection) for them. Each figure is the busiest proxy's, as the
quotas are each proxy's.

A proxy logs a topic or a group by name only where an entry of its own sets its quota; the others are logged
together under ``<default>``, a sum over every topic (group) under that entry, not any one's figure. So a topic or a
group is recommended a figure of its own only where the log names it, and the ``<default>`` entry comes from the
fleet of those named (:mod:`analytics.fleet`), never from the sum; the outputs say so. Offenders are judged as for
the other kinds (:mod:`analytics.outliers`): a topic against the topics, a group against the groups, a client's
request rate against the client entities'.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from analytics.recommend import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    Rules,
    byte_rate,
    entity_id,
    entity_key,
    figure_text,
    round_up,
)
from quota.primitives.entity import DEFAULT, REQUEST_RATE

MIN_REQUEST_RATE = 1.0
"""The least request_rate recommended, requests/s: over the default window (11 samples of 1 s) a dozen requests at
once, what a client's start-up sends."""

NO_FLEET = ("topic", "partition")
"""A partition's entity parts: no fleet of offenders. The partitions named are few and each has an entry for being
unlike its topic's others (a hot one), so none is judged against the others; a default over every topic's partitions
(``{topic: <default>, partition: <default>}``) is no entry the proxy takes. One topic's partitions, where the log
names every one of them (none under ``<default>``), get the topic's ``partition: <default>`` entry by the fleet
default's rule (:func:`analytics.fleet.with_defaults`)."""

Recommendation = tuple[dict, str, float, str]  # (entity, key, value, what it rests on)


def entity_of(row: Mapping) -> dict:
    """The ``entity:`` mapping of a ``named_stats`` row: a partition's as its YAML entry is written,
    ``{topic: orders, partition: 3}`` (``partition: "<default>"``)."""
    partition = row.get("partition")
    if partition is not None:
        return {"topic": row["topic"], "partition": int(partition) if partition.isdigit() else partition}
    if row["topic"] is not None:
        return {"topic": row["topic"]}
    if row["group"] is not None:
        return {"group": row["group"]}
    return entity_key(row["user"], row["client_id"])


def lumped(row: Mapping) -> bool:
    """The row sums every topic (group, partition of a topic) under the ``<default>`` entry: no one's figure."""
    return DEFAULT in (row["topic"], row["group"], row.get("partition"))


def _records(row: Mapping) -> str:
    return "of the partition's records" if row.get("partition") is not None else "of the topic's records"


def basis(row: Mapping, rules: Rules) -> tuple[float | None, str]:
    """The value recommended for the row's key and what it rests on, in words; for an entity a quota held, on its
    estimated demand (:func:`held_basis`)."""
    p99, peak, n = row["rate_p99"] or 0.0, row["burst_max"] or 0.0, row["intervals"] or 0
    if row.get("held_intervals"):
        return held_basis(row, rules)
    if row["key"] in (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE):
        return byte_rate(p99, rules), (
            f"p99 {p99:,.0f} B/s {_records(row)} over {n} intervals on the quota's window, the busiest proxy's"
        )
    if not p99 and not peak:
        return None, ""
    what = "requests naming the group" if row["group"] is not None else f"{', '.join(rules.request_rate_apis)} requests"
    steady = round_up(p99 * rules.headroom)
    return max(MIN_REQUEST_RATE, steady), (
        f"p99 {figure_text(p99)} {what}/s over {n} intervals on the quota's window (peak {figure_text(peak)}/s in one "
        f"interval), the busiest proxy's, x headroom {rules.headroom:g} = {figure_text(steady)}"
        + ("" if steady >= MIN_REQUEST_RATE else f"; at least {MIN_REQUEST_RATE:g}/s: a client's start-up burst")
    )


def held_basis(row: Mapping, rules: Rules) -> tuple[float | None, str]:
    """A topic or a client held (``held_intervals``): its rates are what its quotas let through, so the figure
    rests on the demand the holds hid (``demand``, :mod:`analytics.summed_demand`): ``max(demand, p99) x headroom``;
    where none could be estimated (held through every held interval), on the p99 it was let through, said as such."""
    p99, n, demand = row["rate_p99"] or 0.0, row["intervals"] or 0, row.get("demand")
    topic = row["key"] in (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE)
    per_s = "B/s" if topic else "requests/s"
    what = _records(row) if topic else f"of {', '.join(rules.request_rate_apis)}"
    held = f"held by a quota in {row['held_intervals']} of {n} intervals (p99 {figure_text(p99)} {per_s} {what})"
    if demand:
        value = round_up(max(demand, p99) * rules.headroom)
        said = f"{held}; estimated demand {figure_text(demand)} {per_s}, its pace while free"
    else:
        value = round_up(p99 * rules.headroom)
        said = f"{held}; demand not measurable (held through every interval it was held in): raise it and watch"
    if topic:
        return max(1, int(value)), said
    return max(MIN_REQUEST_RATE, value), said


def lumped_partitions(rows: Iterable[Mapping]) -> set[tuple[str, str]]:
    """``(topic, key)`` of each topic whose partitions without an entry of their own are logged together under
    ``<default>`` (``orders/<default>``) for that key."""
    return {(row["topic"], row["key"]) for row in rows if row.get("partition") == DEFAULT}


def recommendations(rows: Iterable[Mapping], rules: Rules) -> Iterator[Recommendation]:
    """``(entity, key, value, what it rests on)`` for every row with a figure of its own."""
    for row in rows:
        if lumped(row):
            continue
        value, text = basis(row, rules)
        if value:
            yield entity_of(row), row["key"], value, text


def fleets(rows: Iterable[Mapping]) -> dict[tuple[tuple[str, ...], str], list[dict]]:
    """The entities of each fleet (as :func:`analytics.outliers.fleets`): the topics, the groups, and the client
    entities that sent requests request_rate counts, per key; the ``<default>`` sums are no member, nor is a
    partition (:data:`NO_FLEET`)."""
    out: dict[tuple[tuple[str, ...], str], list[dict]] = {}
    for row in rows:
        if not lumped(row) and row.get("partition") is None:
            entity = entity_of(row)
            out.setdefault((tuple(entity), row["key"]), []).append(entity)
    return out


def notes(rows: Iterable[Mapping], rules: Rules) -> list[str]:
    """Lines every output carries about these kinds: what request_rate counts, and the ``<default>`` sums."""
    rows = list(rows)
    if not rows:
        return []
    out = [
        f"request_rate, topic and partition byte rates: per proxy under either quota.scope (each proxy keeps them), the busiest "
        f"proxy's; request_rate counts {', '.join(rules.request_rate_apis)} (quota.request.rate.apis)"
    ]
    for kind, key in (("topic", PRODUCER_BYTE_RATE), ("topic", CONSUMER_BYTE_RATE), ("group", REQUEST_RATE)):
        lump = next((r for r in rows if r[kind] == DEFAULT and r["key"] == key), None)
        if lump is not None:
            out.append(
                f"{kind}s under <default> ({key}) are logged together, p99 {figure_text(lump['rate_p99'] or 0)}/s "
                f"for all of them: no {kind}'s own figure, so none is recommended from it (the {kind} <default> "
                f"entry stays as it is, or comes from the fleet of {kind}s named)"
            )
    for lump in rows:
        if lump.get("partition") == DEFAULT:
            out.append(
                f"partitions of {lump['topic']} under <default> ({lump['key']}) are logged together, p99 "
                f"{figure_text(lump['rate_p99'] or 0)}/s for all of them: no partition's own figure, so none is "
                f"recommended from it (the {{topic: {lump['topic']}, partition: <default>}} entry stays as it is)"
            )
    return out


def merged(items: Iterable[Mapping], extra: Iterable[Recommendation]) -> list[dict]:
    """``items`` (one per entity) with the ``extra`` keys added, an entity new to them an item of its own."""
    out = {entity_id(it["entity"]): dict(it) for it in items}
    for entity, key, value, _ in extra:
        out.setdefault(entity_id(entity), {"entity": entity})[key] = value
    return list(out.values())


def merged_basis(
    basis_: Mapping[tuple, Mapping[str, str]], extra: Iterable[Recommendation]
) -> dict[tuple, dict[str, str]]:
    """What each key rests on, the ``extra`` keys' added."""
    out = {eid: dict(keys) for eid, keys in basis_.items()}
    for entity, key, _, text in extra:
        out.setdefault(entity_id(entity), {})[key] = text
    return out
