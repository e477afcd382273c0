"""Which quota sensors a changed entity can reach, so that a new quota table refreshes those and no others.

A sensor is re-resolved through its representative, one ``(user, client_id)`` counted in it. An entity with a named
user (``/users/alice``, ``/users/alice/clients/...``) can only match clients of that user; one with a named
client-id under no user or the ``<default>`` user only clients with that client-id; a default for every user or
every client-id (``/users/<default>``, ``/clients/<default>``, ``/users/<default>/clients/<default>``) any client.
The index holds each representative's user and client-id (one tags value, or a set when several sensors share a
name), kept as sensors are made, represented anew and expired. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable

from quota.primitives.entity import DEFAULT, QuotaEntity, QuotaTags


class Reach:
    __slots__ = ("_by_user", "_by_client")

    def __init__(self) -> None:
        self._by_user: dict[str, QuotaTags | set[QuotaTags]] = {}
        self._by_client: dict[str, QuotaTags | set[QuotaTags]] = {}

    def add(self, representative: tuple[str, str], tags: QuotaTags) -> None:
        _index(self._by_user, representative[0], tags)
        _index(self._by_client, representative[1], tags)

    def remove(self, representative: tuple[str, str], tags: QuotaTags) -> None:
        _unindex(self._by_user, representative[0], tags)
        _unindex(self._by_client, representative[1], tags)

    def compact(self) -> None:
        """New dicts of their current size (a dict keeps the room of deleted entries)."""
        self._by_user = dict(self._by_user)
        self._by_client = dict(self._by_client)

    def reached_by(self, changed: Iterable[QuotaEntity]) -> set[QuotaTags] | None:
        """The tags of the sensors the entities can reach; None when one of them reaches every sensor."""
        tags: set[QuotaTags] = set()
        for entity in changed:
            if entity.user is not None and entity.user != DEFAULT:
                _into(tags, self._by_user.get(entity.user))
            elif entity.client_id is not None and entity.client_id != DEFAULT:
                _into(tags, self._by_client.get(entity.client_id))
            else:
                return None
        return tags


def _index(index: dict[str, QuotaTags | set[QuotaTags]], name: str, tags: QuotaTags) -> None:
    held = index.get(name)
    if held is None:
        index[name] = tags
    elif isinstance(held, set):
        held.add(tags)
    elif held != tags:
        index[name] = {held, tags}


def _unindex(index: dict[str, QuotaTags | set[QuotaTags]], name: str, tags: QuotaTags) -> None:
    held = index.get(name)
    if isinstance(held, set):
        held.discard(tags)
        if len(held) == 1:
            index[name] = next(iter(held))
    elif held == tags:
        del index[name]


def _into(tags: set[QuotaTags], held: QuotaTags | set[QuotaTags] | None) -> None:
    if isinstance(held, set):
        tags.update(held)
    elif held is not None:
        tags.add(held)
