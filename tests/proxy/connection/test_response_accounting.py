"""Every response a client gets is accounted exactly once (its bytes to the API's metrics and the usage log, its
latency); a response the client never gets (to an ``acks=0`` Produce, to the proxy's own probe) not at all.

Drives :class:`proxy.connection.core.ConnectionCore` on bytes, as the socket shell does, with a planner that makes
each kind of response: streamed, streamed with its rest spliced (passed), buffered and rewritten, buffered with a
throttle merged, answered by the proxy itself, dropped.
"""

from __future__ import annotations

import gc
import struct
from collections import Counter

from config.loader import parse_config
from proxy.apis import PASS, ConnectionScope, Plan
from proxy.apis.response_leg import ResponseLeg
from proxy.cluster.topics import Topics
from proxy.codec.apis import API_VERSIONS, LIST_OFFSETS, METADATA, PRODUCE
from proxy.codec.frame import DROP, STREAM
from proxy.codec.header import encode_request_header, encode_response_header, frame
from proxy.codec.messages import encode_request, encode_response, new_request, new_response
from proxy.connection.core import ConnectionCore
from proxy.enforcement.proxy_quotas import ProxyQuotas
from proxy.ops.usage_table import UsageTable
from proxy.session.session import Session
from quota.primitives.decision import Throttle

_LOCAL = {}  # correlation id -> the proxy's own answer


class _Api:
    def __init__(self, key, seen):
        self.key, self.seen = key, seen

    def request(self, nbytes):
        pass

    def answered(self, nbytes, seconds):
        self.seen["bytes", self.key] += nbytes
        self.seen["responses", self.key] += 1
        self.seen["latencies", self.key] += 1


class _Usage:
    def __init__(self, seen):
        self.seen = seen

    def recorder(self, session):
        return self

    def request(self, header):
        pass

    def response(self, header, nbytes):
        self.seen["usage", header.api_key] += 1

    def throttled(self, header, throttle, mute_ms, now_ns):
        pass


def _planner(scope, session, header):
    if header.api_key == METADATA:  # buffered: its response rewritten (2 bytes longer)
        return Plan(action=STREAM, leg=ResponseLeg(rewrite=lambda body: bytes(body) + b"\x00\x00"))
    if header.api_key == API_VERSIONS:  # answered by the proxy
        return Plan(action=DROP, local_response=_LOCAL[header.correlation_id])
    if header.api_key == PRODUCE and header.expects_response:  # buffered: a throttle merged into the response
        return Plan(action=STREAM, throttle=Throttle(5, 0))
    return PASS


def _scope() -> ConnectionScope:
    config = parse_config({"upstream": {"bootstrap_servers": ["b:1"]}, "listeners": [{"name": "L", "bind": "h:2"}]})
    return ConnectionScope(None, Topics(), ProxyQuotas(config).home)


def _core(scope: ConnectionScope, **given) -> ConnectionCore:
    """A connection core of listener L for 127.0.0.1, as the socket code makes one (``given``: what a test sets)."""
    limits = {"max_request_bytes": 1 << 20, "max_response_bytes": 1 << 20, "max_inflight": 50}
    return ConnectionCore(scope, Session("L", "127.0.0.1"), **limits, **given)


def test_each_kind_of_response_is_accounted_once_and_a_dropped_one_never():
    seen: Counter = Counter()
    apis = {}
    clock = [1_000_000]
    to_client, to_broker = bytearray(), bytearray()
    core = _core(
        _scope(),
        write_client=to_client.extend,
        write_broker=to_broker.extend,
        clock=lambda: clock[0],
        api_metrics=lambda key: apis.setdefault(key, _Api(key, seen)),
        planner=_planner,
        usage=_Usage(seen),
    )

    def produce(corr, acks):
        body = encode_request(
            PRODUCE,
            5,
            new_request(
                PRODUCE,
                5,
                acks=acks,
                timeout_ms=1000,
                topic_data=[{"name": "t", "partition_data": [{"index": 0, "records": bytes(100)}]}],
            ),
        )
        return frame(encode_request_header(PRODUCE, 5, corr, "c") + body)

    _LOCAL[4] = frame(encode_response_header(API_VERSIONS, 0, 4) + b"\x00\x00\x00\x00\x00\x00")
    requests = [
        frame(encode_request_header(LIST_OFFSETS, 5, 1, "c") + bytes(30)),  # streamed
        frame(encode_request_header(LIST_OFFSETS, 5, 2, "c") + bytes(30)),  # streamed, its rest spliced
        frame(encode_request_header(METADATA, 1, 3, "c") + bytes(4)),  # rewritten
        frame(encode_request_header(API_VERSIONS, 0, 4, "c")),  # answered locally, in its turn
        produce(5, acks=0),  # dropped (a broker that answers acks=0), then the proxy's probe: dropped
        produce(6, acks=1),
    ]  # throttled: buffered, throttle_time_ms merged
    for request in requests:
        core.client_bytes(memoryview(request))
        core.step(clock[0])
        clock[0] += 1_000_000
    assert seen == Counter(), "accounted before any response went out"

    answers = []  # every request the broker got, answered in order (the probe and the acks=0 Produce too)
    while to_broker:
        size, api_key, version, corr = struct.unpack_from(">ihhi", to_broker)
        del to_broker[: size + 4]
        body = encode_response(PRODUCE, 5, new_response(PRODUCE, 5)) if api_key == PRODUCE else bytes(40)
        answers.append(frame(encode_response_header(api_key, version, corr) + body))
    assert len(answers) == 6  # 1, 2, 3, 5, the probe, 6 (4 was answered by the proxy)
    spliced = 0
    for i, answer in enumerate(answers):
        if i == 1:  # the socket code moves this one's rest itself, between the sockets
            core.broker_bytes(memoryview(answer[:12]))
            spliced = core.response_streaming
            core.responses_passed(spliced)
        else:
            core.broker_bytes(memoryview(answer))
        core.step(clock[0])
    for key, answered in ((LIST_OFFSETS, 2), (METADATA, 1), (API_VERSIONS, 1), (PRODUCE, 1)):
        assert (seen["responses", key], seen["latencies", key], seen["usage", key]) == (answered,) * 3, key
    assert sum(n for (kind, _), n in seen.items() if kind == "bytes") == len(to_client) + spliced
    assert seen["bytes", METADATA] == len(answers[2]) + 2  # as the client got it, after the rewrite


def test_a_closed_connections_core_is_freed_without_the_cycle_collector():
    """Both paths record through one accounting that holds neither path (a response leg's usage too), so nothing
    a connection's core holds refers back to it: its memory goes when the socket code drops it, with the cycle
    collector off (it runs rarely under load, and never while frozen objects are the bulk of the heap)."""
    scope = _scope()
    gc.disable()  # from here what is allocated stays in the youngest generation, which alone is collected (fast)
    gc.collect(0)
    try:
        core = _core(
            scope,
            write_client=lambda data: None,
            write_broker=lambda data: None,
            clock=lambda: 1_000_000,
            api_metrics=lambda key: _Api(key, Counter()),
            spawn=lambda start, done: None,  # the socket code's: what the core wraps to send answers after it
            usage=UsageTable(),
        )
        del core
        assert gc.collect(0) == 0  # nothing was left for the collector: freed by reference counting
    finally:
        gc.enable()
