"""Which path reads every request's and response's first bytes: the C extension ``proxy.codec._accel`` or the pure
Python it mirrors.

The extension is built from ``proxy/codec/native/`` when the package is installed and a C compiler is present
(optional: without one the install succeeds and the pure path runs). It holds the same functions as the pure ones
of :mod:`proxy.codec.header`, :mod:`proxy.codec.produce_prefix` and :mod:`proxy.codec.skim` (same results, same
errors for the same bytes); each of those modules binds its public name to one or the other once, at import, with
:func:`choose`. ``KAFKA_QUOTA_PROXY_PURE_PYTHON=1`` in the environment keeps the pure path even where the
extension is built.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar, cast

from quota.primitives.compiled import PURE_ENV, load_compiled

__all__ = ["LABEL", "NATIVE", "PATH", "PURE_ENV", "choose"]

F = TypeVar("F", bound=Callable[..., Any])


def _load() -> tuple[ModuleType | None, str]:
    """(the extension or None, why this path)."""
    return load_compiled("proxy.codec._accel")


NATIVE, PATH = _load()
"""The extension (None on the pure path) and a line saying which path runs, for the log and ``--version``."""
LABEL = "python" if NATIVE is None else "c"
"""The path in a word: ``kafka_quota_proxy_codec_info{path}``."""


def choose(name: str, pure: F) -> F:
    """The extension's function ``name`` when it is in use, else ``pure``: bound once, at import, by the module that
    defines ``pure``."""
    if NATIVE is None:
        return pure
    return cast(F, getattr(NATIVE, name))
