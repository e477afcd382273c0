"""``ssl.principal.mapping.rules`` as Kafka writes them, parsed at load (a bad rule fails there, with its path).

- ``RULE:pattern/replacement/`` with an optional ``L`` or ``U`` after the last slash (lower or upper case the
  result); ``$1``... in the replacement are the pattern's groups; a ``/`` inside pattern or replacement is ``\\/``;
- ``DEFAULT``: the subject as it is.

No rule (the default) is ``DEFAULT``. Applying them to a client certificate's subject is
:func:`proxy.session.principals.map_principal`. Pure: strings in, values out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RULE = re.compile(r"\s*(DEFAULT|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?))\s*(?:,|$)")


class MappingError(ValueError):
    """Rules that cannot be parsed, or a subject no rule matches."""


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        match = self.pattern.fullmatch(dn)
        if match is None:
            return None
        result = match.expand(self.replacement)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


def parse_rules(text: str | list[str] | None) -> tuple[Rule, ...]:
    """Kafka's ``ssl.principal.mapping.rules`` (one string, rules separated by commas) or a list of rules."""
    if text is None:
        return (Rule(None),)
    items = text if isinstance(text, list) else [text]
    rules: list[Rule] = []
    for item in items:
        if not isinstance(item, str):
            raise MappingError(f"expected rule strings, got {item!r}")
        pos = 0
        while pos < len(item):
            match = _RULE.match(item, pos)
            if match is None or match.end() == pos:
                raise MappingError(
                    f"cannot parse the rule at {item[pos : pos + 60]!r} (RULE:pattern/replacement/[LU] or DEFAULT)"
                )
            pos = match.end()
            if match.group(1) == "DEFAULT":
                rules.append(Rule(None))
                continue
            pattern = match.group(2).replace("\\/", "/")
            # Java's $1 is Python's \1 (and a literal backslash stays one)
            replacement = re.sub(r"\$(\d+)", r"\\\1", match.group(3).replace("\\/", "/"))
            try:
                rules.append(Rule(re.compile(pattern), replacement, match.group(4)))
            except re.error as exc:
                raise MappingError(f"bad pattern {pattern!r}: {exc}") from None
    if not rules:
        raise MappingError("no rules given")
    return tuple(rules)
