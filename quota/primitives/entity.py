"""Quota entities (KIP-55) and Kafka's eight levels of precedence among them (the table that resolves them is
:mod:`quota.primitives.quota_table`).

An entity is a ``user``, a ``client-id``, or a ``(user, client-id)`` pair; each part is a name or the
``<default>`` marker. For a connection's ``(user, client_id)`` the most specific configured entity wins, per quota
key, in this order (``ClientQuotaManager`` in apache/kafka)::

    /users/<user>/clients/<client-id>      tags (user, client-id)
    /users/<user>/clients/<default>        tags (user, client-id)
    /users/<user>                          tags (user, "")
    /users/<default>/clients/<client-id>   tags (user, client-id)
    /users/<default>/clients/<default>     tags (user, client-id)
    /users/<default>                       tags (user, "")
    /clients/<client-id>                   tags ("", client-id)
    /clients/<default>                     tags ("", client-id)
    (nothing)                              tags ("", client-id), unlimited

A quota group (:mod:`quota.primitives.quota_groups`, the proxy's own) stands just below the name it matches: a group
of users after ``/users/<user>``, a group of client ids after ``/clients/<client-id>``; its tags are the group's.

The tags (Kafka's ``quotaMetricTags``) name the sensor, so they decide who shares a quota: a ``<default>`` user
quota is applied to each user separately (tags ``(alice, "")``, ``(bob, "")``), and all clients of one user that
resolve to ``(alice, "")`` share it. The user is whatever principal name the proxy knows (``ANONYMOUS`` before SASL);
nothing here depends on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

DEFAULT = "<default>"
"""The default-entity marker, as Kafka writes it (``ClientQuotaManager.DEFAULT_NAME``)."""

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
PRODUCER_IDS_RATE = "producer_ids_rate"
REQUEST_RATE = "request_rate"  # the proxy's own: requests per second of the APIs quota.request.rate.apis lists
_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE, PRODUCER_IDS_RATE)
QUOTA_KEYS = frozenset({*_KEYS, REQUEST_RATE})
"""Quota keys a ``user``/``client-id`` entity may carry (Kafka's ``QuotaConfig.*_OVERRIDE_CONFIG`` names)."""

USER = "user"
CLIENT_ID = "client-id"


class QuotaTags(NamedTuple):
    """The metric tags of a quota sensor; clients with equal tags share one quota. ``""`` means "not part of it"."""

    user: str
    client_id: str

    def as_metric_tags(self) -> dict[str, str]:
        """As Kafka tags its ``byte-rate``/``throttle-time`` metrics: ``{"user": ..., "client-id": ...}``."""
        return {USER: self.user, CLIENT_ID: self.client_id}


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """A configured entity: ``user`` and/or ``client_id``, each a name, :data:`DEFAULT`, or ``None`` (absent)."""

    user: str | None = None
    client_id: str | None = None

    def __post_init__(self) -> None:
        if self.user is None and self.client_id is None:
            raise ValueError("a quota entity needs a user, a client-id, or both")
        for part in (self.user, self.client_id):
            if part is not None and not isinstance(part, str):
                raise ValueError(f"quota entity names must be strings, got {part!r}")

    @classmethod
    def from_dict(cls, entity: Mapping[str, Any]) -> QuotaEntity:
        """From ``{"user": "alice", "client-id": "etl"}``; a value of ``None`` or ``"<default>"`` is the default."""
        unknown = set(entity) - {USER, CLIENT_ID}
        if unknown:
            raise ValueError(f"unknown quota entity type(s) {sorted(unknown)}; expected {USER!r} and/or {CLIENT_ID!r}")
        if not entity:
            raise ValueError("a quota entity needs a user, a client-id, or both")
        user = (entity[USER] if entity[USER] is not None else DEFAULT) if USER in entity else None
        client_id = (entity[CLIENT_ID] if entity[CLIENT_ID] is not None else DEFAULT) if CLIENT_ID in entity else None
        return cls(user=user, client_id=client_id)

    @property
    def path(self) -> str:
        """Kafka's config path for this entity, e.g. ``/users/<default>/clients/etl``."""
        parts = []
        if self.user is not None:
            parts.append(f"/users/{self.user}")
        if self.client_id is not None:
            parts.append(f"/clients/{self.client_id}")
        return "".join(parts)

    def __str__(self) -> str:
        return self.path


@dataclass(frozen=True, slots=True)
class QuotaEntry:
    """One configured entity with its quota values; ``shadow`` marks a quota computed and metered but not applied."""

    entity: QuotaEntity
    quotas: Mapping[str, float]
    shadow: bool = False


@dataclass(frozen=True, slots=True)
class ResolvedQuota:
    """The quota that applies to one ``(user, client_id)`` for one key, and the sensor it is counted in.

    ``entity is None`` means no entity matched: the limit is infinite and nothing is ever throttled.
    """

    limit: float
    tags: QuotaTags
    entity: QuotaEntity | None = None
    shadow: bool = False

    @property
    def unlimited(self) -> bool:
        return self.entity is None


# (user part, client part, tags user from request?, tags client-id from request?) in precedence order.
# "name" means the request's own name. None means the entity has no such part.
LEVELS: tuple[tuple[str | None, str | None, bool, bool], ...] = (
    ("name", "name", True, True),  # /users/<user>/clients/<client-id>
    ("name", "default", True, True),  # /users/<user>/clients/<default>
    ("name", None, True, False),  # /users/<user>
    ("default", "name", True, True),  # /users/<default>/clients/<client-id>
    ("default", "default", True, True),  # /users/<default>/clients/<default>
    ("default", None, True, False),  # /users/<default>
    (None, "name", False, True),  # /clients/<client-id>
    (None, "default", False, True),  # /clients/<default>
)


_LEVEL_OF_SHAPE = {(user_kind, client_kind): index for index, (user_kind, client_kind, _, _) in enumerate(LEVELS)}

LEVEL_PATHS = tuple(
    QuotaEntity(
        None if u is None else ("<user>" if u == "name" else DEFAULT),
        None if c is None else ("<client-id>" if c == "name" else DEFAULT),
    ).path
    for u, c, _, _ in LEVELS
)
"""Each precedence level as Kafka's docs write it, most specific first (``/users/<user>/clients/<client-id>``)."""


def precedence(entity: QuotaEntity) -> int:
    """The precedence level of a configured entity, 1 (``/users/<user>/clients/<client-id>``) to 8
    (``/clients/<default>``): what :meth:`QuotaTable.resolve` tries first comes first."""
    return _level_of(entity) + 1


def _level_of(entity: QuotaEntity) -> int:
    def kind(part: str | None) -> str | None:
        return None if part is None else ("default" if part == DEFAULT else "name")

    return _LEVEL_OF_SHAPE[(kind(entity.user), kind(entity.client_id))]
