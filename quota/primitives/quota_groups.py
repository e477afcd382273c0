"""Quota groups: one budget shared by several users, several client ids, or every client id under a prefix. Pure.

A quota group is not a consumer group (``{group: NAME}`` in :mod:`quota.primitives.group_quotas` counts requests
that name a consumer group): it is a set of clients an operator names, whose requests count against one quota of
each key the group sets, as if they were one client. It is written ``{quota-group: NAME}`` with its members::

    - entity: {quota-group: etl-team}
      users: [alice, bob]                # or client-ids: [loader-1, loader-2], or client-id-prefix: "job-"
      producer_byte_rate: 10485760

Where a group stands among Kafka's eight levels (:mod:`quota.primitives.entity`): just below the name it matches.
A group of users is looked at after ``/users/<user>`` and before ``/users/<default>/clients/<client-id>``; a group
of client ids after ``/clients/<client-id>`` and before ``/clients/<default>``. A client id named in a group beats a
prefix group; among prefix groups the longest prefix wins. A name in two groups of one kind, or one prefix in two
groups, is a configuration error that names both.

The group's sensor is tagged ``(GROUP_MARK + name, "")``: the user part carries a character no principal the proxy
knows can carry (:data:`GROUP_MARK`, which :func:`principal_name` replaces), so no client, however it names itself,
is ever counted in a group it is not a member of, and the group's tags, as a peer's usage names them, resolve to the
group again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from quota.primitives.entity import DEFAULT, QuotaEntity, QuotaEntry, QuotaTags

QUOTA_GROUP = "quota-group"
"""The entity type, as the YAML writes it (``entity: {quota-group: etl-team}``)."""

USERS = "users"
CLIENT_IDS = "client-ids"
CLIENT_ID_PREFIX = "client-id-prefix"
MEMBER_KEYS = (USERS, CLIENT_IDS, CLIENT_ID_PREFIX)
"""How an entry names its members: users, or client ids and/or a client-id prefix."""

GROUP_MARK = "\x00"
"""The first character of a group's tag: never in a principal (:func:`principal_name`) nor in a configured name."""


def principal_name(name: str) -> str:
    """A principal as the quotas see it: any :data:`GROUP_MARK` replaced (U+FFFD, as a SASL name's bad bytes are), so
    no user can pass for a quota group's tags."""
    return name.replace(GROUP_MARK, "\ufffd") if GROUP_MARK in name else name


def group_of_tags(tags: tuple[str, str]) -> str | None:
    """The quota group whose sensor ``tags`` name, or None for a client's own tags."""
    user = tags[0]
    return user[1:] if user[:1] == GROUP_MARK else None


@dataclass(frozen=True, slots=True)
class QuotaGroupEntity(QuotaEntity):
    """A quota group: ``user`` holds its tag (:data:`GROUP_MARK` + name), ``client_id`` is always None. Never equal to
    a client entity. ``by_user``: its members are users (else client ids)."""

    by_user: bool = True

    @classmethod
    def of(cls, name: str, by_user: bool = True) -> QuotaGroupEntity:
        return cls(user=GROUP_MARK + name, client_id=None, by_user=by_user)

    @property
    def level_path(self) -> str:
        """Where it stands among Kafka's levels, for explaining."""
        if self.by_user:
            return "a quota group of users, after level 3 (/users/<user>)"
        return "a quota group of client ids, after level 7 (/clients/<client-id>)"

    @property
    def name(self) -> str:
        return (self.user or GROUP_MARK)[1:]

    @property
    def tags(self) -> QuotaTags:
        return QuotaTags(self.user or GROUP_MARK, "")

    @property
    def path(self) -> str:
        return f"/quota-groups/{self.name}"


@dataclass(frozen=True, slots=True)
class QuotaGroupEntry(QuotaEntry):
    """A group's entry: its quotas, and its members (``users``, or ``client_ids`` and/or ``client_id_prefix``)."""

    users: frozenset[str] = frozenset()
    client_ids: frozenset[str] = frozenset()
    client_id_prefix: str | None = None

    @property
    def tags(self) -> QuotaTags:
        """The tags of the group's sensor (:data:`GROUP_MARK` + name, "")."""
        return QuotaTags(self.entity.user or GROUP_MARK, "")

    @property
    def by_user(self) -> bool:
        """Whether the members are users (else client ids)."""
        return bool(self.users)

    @property
    def name(self) -> str:
        entity = self.entity
        assert isinstance(entity, QuotaGroupEntity)
        return entity.name

    def members(self) -> str:
        """The members as the configuration names them (for explaining)."""
        if self.users:
            return f"{USERS}: {', '.join(sorted(self.users))}"
        named = [f"{CLIENT_IDS}: {', '.join(sorted(self.client_ids))}"] if self.client_ids else []
        prefix = [f"{CLIENT_ID_PREFIX}: {self.client_id_prefix}"] if self.client_id_prefix is not None else []
        return "; ".join(named + prefix)


def _check(entry: QuotaEntry) -> QuotaGroupEntry:
    if not isinstance(entry, QuotaGroupEntry) or not isinstance(entry.entity, QuotaGroupEntity):
        raise ValueError(f"{entry.entity.path}: not a quota group")
    name = entry.name
    if not name or name == DEFAULT or GROUP_MARK in name:
        raise ValueError(f"{entry.entity.path}: a quota group needs a name of its own")
    if entry.users and (entry.client_ids or entry.client_id_prefix is not None):
        raise ValueError(f"{entry.entity.path}: a quota group has users or client ids, not both")
    if not (entry.users or entry.client_ids or entry.client_id_prefix):
        raise ValueError(f"{entry.entity.path}: a quota group needs members")
    for member in (*entry.users, *entry.client_ids):
        if not member or member == DEFAULT or GROUP_MARK in member:
            raise ValueError(f"{entry.entity.path}: {member!r} cannot be a member (a name of its own is needed)")
    return entry


class QuotaGroups:
    """The configured quota groups and who belongs to which; immutable. Finding a client's group costs one lookup
    for a user, and for a client id one lookup plus one per distinct prefix length configured."""

    __slots__ = ("entries", "_by_user", "_by_client", "_by_prefix", "_prefix_lengths", "_keys")

    def __init__(self, entries: Iterable[QuotaEntry] = ()) -> None:
        self.entries: tuple[QuotaGroupEntry, ...] = tuple(_check(entry) for entry in entries)
        by_name: dict[str, QuotaGroupEntry] = {}
        self._by_user: dict[str, QuotaGroupEntry] = {}  # members, and every group's own tag (a peer's usage)
        self._by_client: dict[str, QuotaGroupEntry] = {}
        self._by_prefix: dict[str, QuotaGroupEntry] = {}
        self._keys: dict[bool, set[str]] = {True: set(), False: set()}  # by_user -> quota keys set
        for entry in self.entries:
            if entry.name in by_name:
                raise ValueError(f"{entry.entity.path}: configured more than once")
            by_name[entry.name] = entry
            self._by_user[GROUP_MARK + entry.name] = entry
            self._keys[entry.by_user].update(entry.quotas)
            for member in entry.users:
                _join(self._by_user, member, entry, "user")
            for member in entry.client_ids:
                _join(self._by_client, member, entry, "client id")
            if entry.client_id_prefix is not None:
                _join(self._by_prefix, entry.client_id_prefix, entry, "client-id prefix")
        self._prefix_lengths = tuple(sorted({len(prefix) for prefix in self._by_prefix}, reverse=True))

    def keys(self, by_user: bool) -> frozenset[str]:
        """The quota keys the groups of users (``by_user``) or of client ids set."""
        return frozenset(self._keys[by_user])

    def of_user(self, user: str) -> QuotaGroupEntry | None:
        """The group ``user`` is a member of (a group's own tag: that group), if any."""
        return self._by_user.get(user)

    def of_client(self, client_id: str) -> QuotaGroupEntry | None:
        """The group ``client_id`` is a member of: named, else under the longest prefix; None when none."""
        found = self._by_client.get(client_id)
        if found is None and self._prefix_lengths:
            by_prefix = self._by_prefix
            for length in self._prefix_lengths:
                if length <= len(client_id):
                    found = by_prefix.get(client_id[:length])
                    if found is not None:
                        break
        return found

    def name_of(self, user: str, client_id: str) -> str | None:
        """The group a client is counted in for the keys its user's group sets, else its client id's (for the usage
        log and explaining; the quota table says which applies for each key)."""
        group = self.of_user(user) or self.of_client(client_id)
        return None if group is None else group.name

    def __len__(self) -> int:
        return len(self.entries)

    def __repr__(self) -> str:
        return f"QuotaGroups({', '.join(entry.name for entry in self.entries)})"


def _join(members: dict[str, QuotaGroupEntry], name: str, entry: QuotaGroupEntry, kind: str) -> None:
    other = members.get(name)
    if other is not None and other is not entry:
        raise ValueError(
            f"{entry.entity.path}: {kind} {name!r} is already in {other.entity.path}; a name is in one group"
        )
    members[name] = entry


def quota_group(
    name: str,
    quotas: dict[str, float],
    *,
    users: Iterable[str] = (),
    client_ids: Iterable[str] = (),
    client_id_prefix: str | None = None,
    shadow: bool = False,
) -> QuotaGroupEntry:
    """One group's entry from plain values, for tests and tools."""
    users = frozenset(users)
    return QuotaGroupEntry(
        QuotaGroupEntity.of(name, bool(users)), dict(quotas), shadow, users, frozenset(client_ids), client_id_prefix
    )


NO_GROUPS = QuotaGroups()
