"""The small callables a consumer Fetch's plan runs for every request and answer, as objects with twins in C.

A polling consumer sends hundreds of Fetch requests a second, and under a ``consumer_byte_rate`` quota in cluster mode
each one's request is capped and its answer trimmed, rewritten and charged. As closures each step was a Python frame
(four or five per request). Each is a class here, the reference and the pure path, and where the connection's C
extension runs (proxy/connection/native/guards.c) its twin of the same name, which takes the common case itself and
calls the same Python for the rest (the plan's ``slow`` callables), so both answer the same
(tests/proxy/apis/test_guards_native.py):

- :class:`PureFetchCap`: a consumer Fetch's ``max_bytes`` against its client's budget (the plan's ``decide``);
- :class:`PureBudgetTrim`: an answer that fits the budget kept as it is, else trimmed (a ``rewrite``);
- :class:`PureTagRewrite`: an answer rewritten only when it carries a top-level tagged field (KIP-951's node
  endpoints, there only when a leader moved; a ``rewrite``);
- :class:`PureChained`: two rewrites, the second on what the first produced.

Each holds everything it calls (nothing is configured into the extension): a budget's ``floor`` is the manager's
``remaining_floor`` bound to the client, ``tagged_fields`` the codec's.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from quota.primitives.compiled import load_compiled

Body = memoryview
TaggedFields = Callable[[int, str, int, Any], dict[int, tuple[int, int]]]
_INT32 = struct.Struct(">i")
T = TypeVar("T")  # what a FetchCap answers: the plan's outcomes


class PureFetchCap(Generic[T]):
    """A consumer Fetch (v3+): a follower's (a ``ReplicaState`` whose replica id ``replica_of`` reads as >= 0)
    answers ``exempt``; one whose ``max_bytes`` is within ``floor()`` answers ``fits``; any other goes to
    ``capped(body, max_bytes)``. The body's layout is checked (``tagged_fields`` skims it) whatever it asks."""

    __slots__ = (
        "tagged_fields",
        "api_key",
        "version",
        "replica_tag",
        "max_bytes_at",
        "floor",
        "fits",
        "exempt",
        "capped",
        "replica_of",
    )

    def __init__(
        self,
        tagged_fields: TaggedFields,
        api_key: int,
        version: int,
        replica_tag: int,
        max_bytes_at: int,
        floor: Callable[[], float],
        fits: T,
        exempt: T,
        capped: Callable[[Body, int], T],
        replica_of: Callable[[Body], int],
    ) -> None:
        self.tagged_fields, self.api_key, self.version = tagged_fields, api_key, version
        self.replica_tag, self.max_bytes_at, self.floor = replica_tag, max_bytes_at, floor
        self.fits, self.exempt, self.capped, self.replica_of = fits, exempt, capped, replica_of

    def __call__(self, body: Body) -> T:
        tags = self.tagged_fields(self.api_key, "request", self.version, body)
        if self.replica_tag in tags and self.replica_of(body) >= 0:
            return self.exempt
        max_bytes: int = _INT32.unpack_from(body, self.max_bytes_at)[0]
        if max_bytes > self.floor():  # it may not fit: the budget, exactly
            return self.capped(body, max_bytes)
        return self.fits


class PureBudgetTrim:
    """An answer no longer than ``floor()`` kept as it is (None), any other handed to ``trim``."""

    __slots__ = ("floor", "trim")

    def __init__(self, floor: Callable[[], float], trim: Callable[[Body], bytes | None]) -> None:
        self.floor, self.trim = floor, trim

    def __call__(self, body: Body) -> bytes | None:
        if len(body) <= self.floor():  # fits the budget, whatever it is exactly
            return None
        return self.trim(body)


class PureTagRewrite:
    """An answer kept as it is (None) unless its top-level tagged fields have ``tag``; then ``rewrite(body, where)``
    with the field's (offset, length)."""

    __slots__ = ("tagged_fields", "api_key", "version", "tag", "rewrite")

    def __init__(
        self,
        tagged_fields: TaggedFields,
        api_key: int,
        version: int,
        tag: int,
        rewrite: Callable[[Body, tuple[int, int]], bytes | None],
    ) -> None:
        self.tagged_fields, self.api_key, self.version, self.tag, self.rewrite = (
            tagged_fields,
            api_key,
            version,
            tag,
            rewrite,
        )

    def __call__(self, body: Body) -> bytes | None:
        where = self.tagged_fields(self.api_key, "response", self.version, body).get(self.tag)
        return None if where is None else self.rewrite(body, where)


class PureChained:
    """``second`` applied to the body ``first`` produced (or to the broker's, when ``first`` keeps it)."""

    __slots__ = ("first", "second")

    def __init__(self, first: Callable[[Body], bytes | None], second: Callable[[Body], bytes | None]) -> None:
        self.first, self.second = first, second

    def __call__(self, body: Body) -> bytes | None:
        rewritten = self.first(body)
        again = self.second(body if rewritten is None else memoryview(rewritten))
        return again if again is not None else rewritten


_TWIN, GUARDS_PATH = load_compiled("proxy.connection._native")
F = TypeVar("F", bound=Callable[..., Any])


def over(name: str, pure: F) -> F:
    """The extension's ``name`` made over the pure function ``pure`` where the extension runs (a twin that takes
    the common case itself and calls ``pure`` for the rest), else ``pure`` itself."""
    return pure if _TWIN is None else getattr(_TWIN, name)(pure)


def twin_over(name: str, pure: F, *rest: Callable[..., Any]) -> F:
    """The extension's ``name`` made over ``rest`` (the pure function's own parts it hands its uncommon cases to)
    and ``pure`` itself where the extension runs, else ``pure``."""
    return pure if _TWIN is None else getattr(_TWIN, name)(*rest, pure)


if TYPE_CHECKING or _TWIN is None:  # typed as the pure classes: the twins take the same arguments
    FetchCap, BudgetTrim, TagRewrite, Chained = PureFetchCap, PureBudgetTrim, PureTagRewrite, PureChained
else:
    FetchCap, BudgetTrim, TagRewrite, Chained = _TWIN.FetchCap, _TWIN.BudgetTrim, _TWIN.TagRewrite, _TWIN.Chained
