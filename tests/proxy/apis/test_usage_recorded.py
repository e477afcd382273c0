"""What a plan or its outcome accounted for (``Usage``: data, not writes) is recorded once by the request path: in
the usage log's row of the request's entity, and each shadow decision in the shadow throttles' count."""

from __future__ import annotations

from config.loader import parse_config
from proxy.apis import PASS, ConnectionScope, ForwardRequest, Plan
from proxy.apis.usage import ShadowNote, Usage
from proxy.cluster.topics import Topics
from proxy.codec.apis import CREATE_TOPICS, LIST_OFFSETS, PRODUCE
from proxy.codec.frame import BUFFER
from proxy.codec.header import encode_request_header, frame
from proxy.connection.core import ConnectionCore
from proxy.enforcement.proxy_quotas import ProxyQuotas
from proxy.ops.usage_table import UsageTable
from proxy.session.session import Session
from quota.primitives.decision import Throttle
from tests.fakes import NULL_API_METRICS

SHADOW = Throttle(40, 40, shadow=True)


def _planner(scope, session, header):
    if header.api_key == PRODUCE:  # accounted at the header
        return Plan(usage=Usage(40, 2, 0, (ShadowNote("producer_byte_rate", SHADOW, header.client_id),)))
    if header.api_key == CREATE_TOPICS:  # accounted when the body is decided
        return Plan(action=BUFFER, decide=lambda body: ForwardRequest(usage=Usage(partition_mutations=3)))
    return PASS


def test_plan_and_outcome_usage_recorded_once_by_the_request_path():
    config = parse_config({"upstream": {"bootstrap_servers": ["b:1"]}, "listeners": [{"name": "L", "bind": "h:2"}]})
    quotas, table = ProxyQuotas(config), UsageTable()
    scope = ConnectionScope(None, Topics(), quotas.home)
    core = ConnectionCore(
        scope,
        Session("L", "127.0.0.1"),
        max_request_bytes=1 << 20,
        max_response_bytes=1 << 20,
        max_inflight=50,
        write_client=lambda data: None,
        write_broker=lambda data: None,
        clock=lambda: 1_000_000,
        api_metrics=lambda key: NULL_API_METRICS,
        planner=_planner,
        usage=table,
    )
    for corr, api_key in enumerate((PRODUCE, PRODUCE, CREATE_TOPICS, LIST_OFFSETS)):
        core.client_bytes(memoryview(frame(encode_request_header(api_key, 3, corr, "etl") + bytes(8))))
    rows = {key[4]: row for key, row in table.take().items()}
    assert (rows[PRODUCE].new_producer_ids, rows[PRODUCE].shadow_throttle_ms) == (4, 80)
    assert rows[CREATE_TOPICS].partition_mutations == 3
    assert (rows[LIST_OFFSETS].new_producer_ids, rows[LIST_OFFSETS].shadow_throttle_ms) == (0, 0)
    assert quotas.shadows.counts == {"producer_byte_rate": [2, 80]}
