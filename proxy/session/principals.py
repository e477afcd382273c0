"""mTLS principals: a client certificate's subject as Kafka names it, mapped by ``ssl.principal.mapping.rules``.

Kafka takes the subject as ``X500Principal.getName()`` (RFC 2253: the most specific RDN first, ``CN=alice,OU=ops,
O=Example,C=US``) and applies the listener's rules in order; the first that matches the whole subject gives the
principal:

- ``RULE:pattern/replacement/`` with an optional ``L`` or ``U`` after the last slash (lower or upper case the
  result); ``$1``... in the replacement are the pattern's groups; a ``/`` inside pattern or replacement is ``\\/``;
- ``DEFAULT``: the subject as it is.

No rule (the default) is ``DEFAULT``. When rules are given and none matches, Kafka refuses the connection; so does
the proxy. Pure: strings in, strings out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# RFC 2253 keywords for the attributes Python's ssl module names; others keep Python's name.
_KEYWORDS = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O", "countryName": "C",
             "stateOrProvinceName": "ST", "localityName": "L", "streetAddress": "STREET", "domainComponent": "DC",
             "userId": "UID", "emailAddress": "EMAILADDRESS"}
_RULE = re.compile(r"\s*(DEFAULT|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?))\s*(?:,|$)")


class MappingError(ValueError):
    """Rules that cannot be parsed, or a subject no rule matches."""


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or (ch == " " and i in (0, len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def subject_dn(subject) -> str:
    """The RFC 2253 string of a subject as ``ssl.SSLSocket.getpeercert()['subject']`` gives it (a tuple of RDNs,
    least specific first): reversed, as Java's ``X500Principal.getName()`` writes it."""
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_KEYWORDS.get(name, name)}={_escape(value)}" for name, value in rdn))
    return ",".join(rdns)


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
                raise MappingError(f"cannot parse the rule at {item[pos:pos + 60]!r} (RULE:pattern/replacement/[LU] "
                                   "or DEFAULT)")
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


def map_principal(dn: str, rules: tuple[Rule, ...]) -> str:
    for rule in rules:
        mapped = rule.apply(dn)
        if mapped is not None:
            return mapped
    raise MappingError(f"no ssl.principal.mapping.rules rule matches {dn!r}")
