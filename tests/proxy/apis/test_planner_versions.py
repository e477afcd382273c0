"""Every API's versions at the edges of what some Kafka broker speaks, and past them, through the request planner
the connections use (the C one where the extension is built: proxy/connection/native/planner.c) and through
plan_request: the same plan kind or the same ProtocolError for each, so a version no broker speaks is never planned
as one that is."""

from __future__ import annotations

import pytest

from config.loader import parse_config
from proxy.apis import UNCOUNTED_PLANNING, ConnectionScope, Session, plan_request
from proxy.cluster.topics import Topics
from proxy.codec.errors import ProtocolError
from proxy.codec.header import RequestHeader
from proxy.connection.request_frames import PLAN_REQUEST
from proxy.enforcement.proxy_quotas import ProxyQuotas

CONFIG = {
    "upstream": {"bootstrap_servers": ["b:1"]},
    "listeners": [{"name": "PLAIN", "bind": "h:2"}],
    "quotas": [{"entity": {"user": "<default>"}, "producer_byte_rate": 10**9, "consumer_byte_rate": 10**9}],
}
EDGES = [
    (key, version)
    for key, (_chain, low, high, _inputs, _asks) in sorted(UNCOUNTED_PLANNING.items())
    for version in (low - 1, low, high, high + 1)
]


def planned(planner, scope, session, header):
    try:
        return type(planner(scope, session, header)).__name__
    except ProtocolError as exc:
        return "ProtocolError", str(exc)


@pytest.mark.parametrize("api_key, version", EDGES)
def test_the_connections_planner_takes_the_versions_plan_request_takes(api_key, version):
    scope = ConnectionScope(None, Topics(), ProxyQuotas(parse_config(CONFIG)).home)
    session = Session("PLAIN", "127.0.0.1")
    header = RequestHeader(100, api_key, version, 7, "c", 20, None)
    expected = planned(plan_request, scope, Session("PLAIN", "127.0.0.1"), header)
    assert planned(PLAN_REQUEST, scope, session, header) == expected
    low, high = UNCOUNTED_PLANNING[api_key][1:3]
    assert (expected[0] == "ProtocolError") == (not low <= version <= high)
