"""Tenants far from their fleet: named as offenders and held to the fleet's figure, not their own. Pure Python.

A tenant's *figure* for a quota key is its own recommendation (:mod:`analytics.recommend`: its p99 x headroom, the
burst its bucket must hold, or the demand a throttle hid). Its *fleet* is every entity of its type that did that kind
of traffic (:func:`fleets`):

- ``producer_byte_rate`` / ``consumer_byte_rate``: the ``{user, client-id}`` (or ``{user}``, ``{client-id}``)
  entities that produced / fetched;
- ``controller_mutation_rate``: every such entity, and ``producer_ids_rate``: every user. Most create no topic and
  start no producer in a day, and that is the fleet's norm: one that did none counts at the figure one event gives
  (:func:`floor`: one partition mutation, one new producer id, in one interval);
- ``connection_creation_rate``: every IP that opened connections.

On the natural log of the figures (a fleet's rates spread over orders of magnitude: log-normal, not normal)::

    m = median(ln x)        d = median(|ln x - m|)  (the MAD)        s = max(d, ln 2)
    offender:  (ln x - m) / s > k        k = 4 (--offender-mads), in a fleet of at least MIN_FLEET (5) entities

Four MADs are about 2.7 standard deviations of a log-normal fleet (its MAD is 0.674 sigma): about one honest tenant
in 290 is named, to be reviewed. The spread is at least ln 2 (a fleet of equal figures, ``d = 0``, is read as spread
by a factor of two), so an offender is at least 2^4 = 16 x its fleet's median. The median and the MAD are taken over the whole
fleet, offenders included: both ignore up to half of it, so a few offenders do not move them.

An offender is recommended the fleet's figure: the :data:`LIMIT_PERCENTILE` (99th) of the figures of the entities
within the fence, the lower of the two around its rank (one tenant's own figure). ``--legitimate ENTITY``
(:func:`parse_entity`) keeps an outlier's own figure where its heavy use is legitimate; it is listed all the same.
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from collections.abc import Iterable, Iterator, Mapping, Sequence

from analytics.recommend import (
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    MIN_RATE,
    OWN_BASIS,
    PRODUCER_BYTE_RATE,
    PRODUCER_IDS_RATE,
    Rules,
    bucket_rate,
    entity_id,
    entity_key,
    figure_text,
)
from quota.primitives.entity import DEFAULT

MIN_SPREAD = math.log(2)  # the least spread a fleet is read with: a factor of two
MIN_FLEET = 5  # fewer entities in a fleet: nobody is judged against it (nor given a default, analytics.fleet)
LIMIT_PERCENTILE = 99.0  # an offender is held to this percentile of the figures within the fence
_KEY_OF_API = {"Produce": PRODUCER_BYTE_RATE, "Fetch": CONSUMER_BYTE_RATE, "*": CONTROLLER_MUTATION_RATE}
FLAG_TYPES = {  # --legitimate's entity types: the commands'
    "users": "user",
    "clients": "client-id",
    "ips": "ip",
    "topics": "topic",
    "groups": "group",
    "quota-groups": "quota-group",
}

Fleet = tuple[tuple[str, ...], str]  # (the entity type's parts, the quota key)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), the lower of the two values around rank ``q / 100 x (n - 1)`` (numpy's
    ``method="lower"``): always one tenant's own figure, never a point between the fleet and an outlier (with 10
    tenants, p90 by interpolation is pulled a tenth of the way to the largest)."""
    ordered = sorted(values)
    return ordered[int(q / 100 * (len(ordered) - 1))]


def fleets(
    entity_rows: Iterable[Mapping], user_rows: Iterable[Mapping], ip_rows: Iterable[Mapping]
) -> dict[Fleet, list[dict]]:
    """The entities of each fleet, from the job's statistics rows (``entity_stats`` with api Produce, Fetch and
    ``*``, ``user_stats``, ``ip_stats``)."""
    out: dict[Fleet, list[dict]] = {}

    def add(entity: dict, key: str) -> None:
        out.setdefault((tuple(entity), key), []).append(entity)

    for row in entity_rows:
        key = _KEY_OF_API.get(row["api"])
        if key is not None and (row["user"] is not None or row["client_id"] is not None):
            add(entity_key(row["user"], row["client_id"]), key)
    for row in user_rows:
        if row["user"] is not None:
            add({"user": row["user"]}, PRODUCER_IDS_RATE)
    for row in ip_rows:
        if row["ip"] is not None:
            add({"ip": row["ip"]}, CONNECTION_CREATION_RATE)
    return out


def floor(key: str, rules: Rules) -> float:
    """The least figure a fleet's entity counts at: what one event gives (one partition mutation, one new producer
    id: the rate whose bucket holds it), 1 B/s, or the proxy's least rate."""
    if key == CONTROLLER_MUTATION_RATE:
        return bucket_rate(0, 1, rules.controller_window_num * rules.controller_window_s, 1.0, rules) or MIN_RATE
    if key == PRODUCER_IDS_RATE:
        return bucket_rate(0, 1, rules.producer_id_window_num, rules.producer_id_window_s, rules) or MIN_RATE
    return 1 if key in (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE) else MIN_RATE


@dataclasses.dataclass(frozen=True)
class Outlier:
    """One entity's key far above its fleet: the evidence, and what it is recommended."""

    entity: dict
    key: str
    figure: float  # its own recommendation
    median: float  # the fleet's median figure
    mads: float  # (ln figure - ln median) / spread
    fleet: int  # entities in the fleet
    limit: float  # the fleet's figure it is held to (LIMIT_PERCENTILE within the fence)
    fence: float  # the MADs past which a figure is an offender's (Rules.offender_mads)
    legitimate: bool  # --legitimate: it keeps its own figure

    @property
    def recommended(self) -> float:
        return self.figure if self.legitimate else self.limit

    def evidence(self) -> str:
        kinds = " and ".join(self.entity)
        return (
            f"{figure_text(self.figure)} is {self.figure / self.median:,.0f} x its fleet's median {figure_text(self.median)} "
            f"({self.fleet} {kinds} entities), {self.mads:.1f} MADs above it on the log scale (offender past {self.fence:g})"
        )

    def comment(self) -> str:
        """What its entry's key says, before what its own figure rests on."""
        if self.legitimate:
            return f"outlier kept: {self.evidence()}; its own figure kept: --legitimate {entity_flag(self.entity)}"
        return (
            f"offender: {self.evidence()}; held to the fleet's p{LIMIT_PERCENTILE:g} {figure_text(self.limit)}, not its "
            f"own figure (--legitimate {entity_flag(self.entity)} keeps it where the use is legitimate)"
        )


def judge(
    items: Iterable[Mapping], found: Mapping[Fleet, Sequence[dict]], rules: Rules, legitimate: Sequence[Mapping] = ()
) -> list[Outlier]:
    """The outliers of each fleet (``found``, :func:`fleets`) among the recommendations ``items``
    (:func:`analytics.recommend.build_quotas`); ``legitimate``: entities (:func:`parse_entity`) that keep their own."""
    own = {(entity_id(it["entity"]), k): v for it in items for k, v in it.items() if k != "entity"}
    out = []
    for (_, key), members in sorted(found.items()):
        if len(members) < MIN_FLEET:
            continue
        least = floor(key, rules)
        figures = [max(own.get((entity_id(m), key), 0), least) for m in members]
        logs = [math.log(x) for x in figures]
        mid = statistics.median(logs)
        spread = max(statistics.median(abs(v - mid) for v in logs), MIN_SPREAD)
        mads = [round((v - mid) / spread, 9) for v in logs]
        fence = rules.offender_mads
        limit = percentile([x for x, z in zip(figures, mads) if z <= fence], LIMIT_PERCENTILE)
        for member, x, z in zip(members, figures, mads):
            if z > fence:
                flagged = any(covers(flag, member) for flag in legitimate)
                out.append(Outlier(member, key, x, math.exp(mid), z, len(members), limit, fence, flagged))
    return out


def hold(
    items: Sequence[Mapping], basis: Mapping[tuple, Mapping[str, str]], outliers: Iterable[Outlier]
) -> tuple[list[dict], dict[tuple, dict[str, str]]]:
    """``(items, basis)`` with each offender's key at its limit, and each outlier's comment saying so before what
    its own figure rests on."""
    said = {eid: dict(keys) for eid, keys in basis.items()}
    held: dict[tuple, dict[str, float]] = {}
    for o in outliers:
        eid = entity_id(o.entity)
        held.setdefault(eid, {})[o.key] = o.recommended
        own = said.setdefault(eid, {}).get(o.key, "")
        said[eid][o.key] = o.comment() + (f"{OWN_BASIS}{own}" if own else "")
    return [{**it, **held.get(entity_id(it["entity"]), {})} for it in items], said


def covers(flag: Mapping[str, str], entity: Mapping[str, str]) -> bool:
    """``flag`` (a --legitimate entity) covers ``entity``: every part it names is the entity's (``users=hog`` covers
    ``{user: hog}`` and ``{user: hog, client-id: any}``)."""
    return all(entity.get(part) == name for part, name in flag.items())


def parse_entity(text: str) -> dict[str, str]:
    """``users=NAME``, ``clients=NAME``, ``users=NAME,clients=NAME``, ``ips=ADDRESS``, ``topics=NAME`` or
    ``groups=NAME`` (the entity types of the commands file), or ``quota-groups=NAME``, as an ``entity:`` mapping. A name may hold ``=`` and
    ``,`` (an mTLS principal ``CN=a,O=b``): the parts are split only before ``clients=``, ``users=`` or ``ips=``.
    Raises ValueError saying what is wrong."""
    entity: dict[str, str] = {}
    for part in re.split(r",(?=(?:users|clients|ips)=)", text):
        kind, sep, name = part.partition("=")
        if not sep or kind not in FLAG_TYPES:
            raise ValueError(
                f"{text!r}: an entity is users=NAME, clients=NAME, users=NAME,clients=NAME, ips=ADDRESS, "
                "topics=NAME, groups=NAME or quota-groups=NAME"
            )
        if not name or name == DEFAULT:
            raise ValueError(f"{text!r}: {kind}= names one tenant (not empty, not {DEFAULT})")
        if FLAG_TYPES[kind] in entity:
            raise ValueError(f"{text!r}: {kind}= given twice")
        entity[FLAG_TYPES[kind]] = name
    alone = next((kind for kind in ("ip", "topic", "group", "quota-group") if kind in entity), None)
    if alone is not None and len(entity) > 1:
        raise ValueError(f"{text!r}: {alone}s= stands alone (a {alone}'s quota is its own, whoever uses it)")
    return {part: entity[part] for part in FLAG_TYPES.values() if part in entity}


def entity_flag(entity: Mapping[str, str]) -> str:
    """The ``--legitimate`` value for ``entity``: ``users=hog,clients=bulk-loader``."""
    types = {part: kind for kind, part in FLAG_TYPES.items()}
    return ",".join(f"{types[part]}={name}" for part, name in entity.items())


def unmatched(
    legitimate: Iterable[Mapping], found: Mapping[Fleet, Sequence[dict]], outliers: Iterable[Outlier]
) -> Iterator[str]:
    """One line per --legitimate entity that keeps nothing: not in the log, or within its fleets already."""
    outlying = [o.entity for o in outliers]
    seen = [m for members in found.values() for m in members]
    for flag in legitimate:
        if not any(covers(flag, m) for m in seen):
            yield f"--legitimate {entity_flag(flag)}: no such entity in this log"
        elif not any(covers(flag, e) for e in outlying):
            yield f"--legitimate {entity_flag(flag)}: within its fleets, its own figures apply anyway"
