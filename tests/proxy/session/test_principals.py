"""mTLS principal mapping (Kafka's ssl.principal.mapping.rules) and the RFC 2253 subject, on plain values."""

import pytest

from config.principal_rules import MappingError, parse_rules
from proxy.session.principals import map_principal, subject_dn

SUBJECT = (
    (("countryName", "US"),),
    (("organizationName", "Example, Inc"),),
    (("organizationalUnitName", "ops"),),
    (("commonName", "Alice"),),
)


def test_the_subject_is_written_most_specific_first_with_escapes():
    assert subject_dn(SUBJECT) == "CN=Alice,OU=ops,O=Example\\, Inc,C=US"


@pytest.mark.parametrize(
    "rules,expected",
    [
        (None, "CN=Alice,OU=ops,O=Example\\, Inc,C=US"),
        ("DEFAULT", "CN=Alice,OU=ops,O=Example\\, Inc,C=US"),
        ("RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/", "Alice@ops"),
        ("RULE:^CN=(.*?),OU=(.*?),.*$/$1/L,DEFAULT", "alice"),
        ("RULE:^CN=(.*?),OU=nope,.*$/$1/,RULE:^CN=(.*?),.*$/$1/U", "ALICE"),
        (["RULE:^CN=([^,]*),.*$/user\\/$1/"], "user/Alice"),
    ],
)
def test_rules_as_kafka_applies_them(rules, expected):
    assert map_principal(subject_dn(SUBJECT), parse_rules(rules)) == expected


def test_no_matching_rule_refuses_and_bad_rules_are_errors():
    with pytest.raises(MappingError):
        map_principal("CN=x", parse_rules("RULE:^OU=(.*)$/$1/"))
    for bad in ("RULE:^CN=(.*$/$1/", "RULE:no-slashes", "SOMETHING"):
        with pytest.raises(MappingError):
            parse_rules(bad)
