"""mTLS principals: a client certificate's subject as Kafka names it, mapped by ``ssl.principal.mapping.rules``.

Kafka takes the subject as ``X500Principal.getName()`` (RFC 2253: the most specific RDN first, ``CN=alice,OU=ops,
O=Example,C=US``) and applies the listener's rules (as :mod:`config.principal_rules` parses them) in order; the
first that matches the whole subject gives the principal. When rules are given and none matches, Kafka refuses the
connection; so does the proxy. Pure: strings in, strings out.
"""

from __future__ import annotations

from config.principal_rules import MappingError, Rule
from quota.primitives.quota_groups import principal_name

# RFC 2253 keywords for the attributes Python's ssl module names; others keep Python's name.
_KEYWORDS = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "countryName": "C",
    "stateOrProvinceName": "ST",
    "localityName": "L",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
    "emailAddress": "EMAILADDRESS",
}


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


def map_principal(dn: str, rules: tuple[Rule, ...]) -> str:
    for rule in rules:
        mapped = rule.apply(dn)
        if mapped is not None:
            return mapped
    raise MappingError(f"no ssl.principal.mapping.rules rule matches {dn!r}")


def certificate_principal(cert: dict | None, rules: tuple[Rule, ...]) -> str | None:
    """mTLS: the principal of a client certificate (as ``ssl.SSLSocket.getpeercert()`` gives it), its subject mapped
    by the listener's rules; None without a certificate (client_auth none or requested: ANONYMOUS, as Kafka).
    Raises :class:`MappingError` when no rule matches: the connection is refused."""
    if not cert or not cert.get("subject"):
        return None
    return principal_name(map_principal(subject_dn(cert["subject"]), rules))
