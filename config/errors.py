"""The errors a bad configuration raises: each names the key path and the reason, and a file's errors are reported
together (:class:`ConfigErrors`), so an operator fixes them in one pass rather than one run per mistake."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")
MAX_LISTED_KEYS = 12  # a section with more keys is not listed in an error: the schema and the docs list them


class ConfigError(Exception):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason

    def each(self) -> tuple[ConfigError, ...]:
        """The single errors this one stands for (itself, unless it gathers several)."""
        return (self,)


class ConfigErrors(ConfigError):
    """Several errors of one configuration, in the order the file gives them; the message lists every one."""

    def __init__(self, errors: Iterable[ConfigError]) -> None:
        self.errors = tuple(e for error in errors for e in error.each())
        lines = "\n".join(f"  {error}" for error in self.errors)
        super().__init__("", f"{len(self.errors)} errors:\n{lines}")

    def each(self) -> tuple[ConfigError, ...]:
        return self.errors


def raise_all(errors: list[ConfigError]) -> None:
    """Raise the errors found, if any: one as itself, several together."""
    found = [e for error in errors for e in error.each()]
    if len(found) == 1:
        raise found[0]
    if found:
        raise ConfigErrors(found)


def collecting(errors: list[ConfigError], parse: Callable[..., T], *args, default=None) -> T:
    """``parse(*args)``; on a ConfigError, its errors are added to ``errors`` and ``default`` is returned, so the
    caller goes on to the next part of the file."""
    try:
        return parse(*args)
    except ConfigError as exc:
        errors.extend(exc.each())
        return default


def unknown_key(path: str, key, known: Iterable[str], what: str = "key") -> ConfigError:
    """An unknown key's error: "did you mean ...?" when a known key is close to it; the known keys when they are
    few; otherwise where to find them (no wall of fifty names to search for the typo)."""
    known = sorted(str(k) for k in known)
    close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.75)
    if close:
        return ConfigError(join(path, key), f"unknown {what}; did you mean {close[0]}?")
    if len(known) <= MAX_LISTED_KEYS:
        return ConfigError(join(path, key), f"unknown {what} (known keys: {', '.join(known)})")
    return ConfigError(
        join(path, key), f"unknown {what} (`kafka-quota-proxy schema` and the configuration reference list every key)"
    )


def unknown_keys(raw: dict, path: str, known: Iterable[str]) -> list[ConfigError]:
    """Every key of ``raw`` not in ``known``, each with its error."""
    known = set(known)
    return [unknown_key(path, key, known) for key in raw if key not in known]


def mapping_with(raw, path: str, known: Iterable[str], required: Iterable[str] = frozenset()) -> dict:
    """``raw`` as a mapping of only ``known`` keys with every ``required`` one; else every unknown and every
    missing key named at once."""
    if not isinstance(raw, dict):
        raise ConfigError(path, f"expected a mapping, got {show(raw)}")
    errors = unknown_keys(raw, path, known)
    errors += [ConfigError(join(path, key), "required key is missing") for key in sorted(required) if key not in raw]
    raise_all(errors)
    return raw


def join(path: str, key) -> str:
    """A key's path below ``path`` (the top level has none)."""
    return f"{path}.{key}" if path else str(key)


def show(value) -> str:
    """A value as an error message shows it: a mapping or list by its kind, anything else as written."""
    if isinstance(value, (dict, list)):
        return type(value).__name__
    return repr(value)
