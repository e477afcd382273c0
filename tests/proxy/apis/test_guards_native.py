"""The C twins of a consumer Fetch's plan steps (proxy/connection/native/guards.c) against their references in
proxy.apis.guards: each pair built over the same callables (which log every call and answer from a script) and
given the same bodies: real Fetch requests and answers of every version, with and without a follower's
``ReplicaState`` or node endpoints, cut short or garbled; budgets as floats, ints, their edges and infinity. After
each call the same answer (the very object), the same error, the same calls made in the same order with the same
bytes. Skipped where the extension is not built (no compiler)."""

from __future__ import annotations

import itertools
import uuid

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from proxy.apis import guards
from proxy.codec.apis import FETCH
from proxy.codec.fetch_prefix import fact_places
from proxy.codec.messages import encode_request, encode_response, new_request, new_response
from proxy.codec.skim import tagged_fields
from quota.primitives.compiled import load_compiled
from tests.twins import outcome

twin, _ = load_compiled("proxy.connection._native")
if twin is None:
    pytest.skip("the C extension is not built here (or the pure path is chosen)", allow_module_level=True)

TOPIC = uuid.UUID("6f1c1c5e-0000-4000-8000-000000000002")
FLOORS = st.one_of(
    st.floats(-10.0, 100_000.0),
    st.integers(-10, 100_000),
    st.sampled_from([0, 0.0, float("inf"), 2**31 - 1, 2**31, 52428800, 52428800.0, 2**60]),
)


class Script:
    """A callable that logs its arguments (bodies as bytes) and answers the next of ``answers`` (an exception is
    raised)."""

    def __init__(self, log: list, name: str, answers) -> None:
        self.log, self.name, self.answers = log, name, itertools.cycle(answers)

    def __call__(self, *args):
        self.log.append((self.name, *[bytes(a) if isinstance(a, memoryview) else a for a in args]))
        answer = next(self.answers)
        if isinstance(answer, Exception):
            raise answer
        return answer


def fetch_request(version: int, max_bytes: int, replica_id: int | None) -> bytes:
    topic = {"topic_id": TOPIC} if version >= 13 else {"topic": "t"}
    fields = {"max_bytes": max_bytes, "topics": [{**topic, "partitions": [{"partition": 0, "fetch_offset": 5}]}]}
    if replica_id is not None and version >= 15:
        fields["replica_state"] = {"replica_id": replica_id, "replica_epoch": 1}
    return encode_request(FETCH, version, new_request(FETCH, version, **fields))


def fetch_answer(version: int, nodes: int) -> bytes:
    topic = {"topic_id": TOPIC} if version >= 13 else {"topic": "t"}
    fields: dict = {"responses": [{**topic, "partitions": [{"partition_index": 0, "records": b""}]}]}
    if nodes and version >= 16:
        fields["node_endpoints"] = [{"node_id": n, "host": "h", "port": 9092, "rack": None} for n in range(nodes)]
    return encode_response(FETCH, version, new_response(FETCH, version, **fields))


def cut(body: bytes, how: int) -> memoryview:
    """The body whole (0), cut short (1) or with a byte garbled (2)."""
    if how == 1:
        return memoryview(body[: len(body) // 2])
    if how == 2:
        garbled = bytearray(body)
        garbled[len(garbled) // 3] ^= 0xFF
        return memoryview(bytes(garbled))
    return memoryview(body)


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(3, 17),
    max_bytes=st.sampled_from([0, 1, 500, 52428800, 2**31 - 1, -1]),
    replica_id=st.sampled_from([None, -1, 0, 3]),
    floor=FLOORS,
    how=st.sampled_from([0, 0, 0, 1, 2]),
    capped_raises=st.booleans(),
)
@example(version=17, max_bytes=52428800, replica_id=3, floor=0.0, how=0, capped_raises=False)  # a follower
@example(version=17, max_bytes=500, replica_id=-1, floor=500, how=0, capped_raises=False)  # exactly the floor
@example(version=12, max_bytes=501, replica_id=None, floor=500.5, how=0, capped_raises=True)
def test_fetch_cap_answers_as_the_pure_one(version, max_bytes, replica_id, floor, how, capped_raises):
    body = cut(fetch_request(version, max_bytes, replica_id), how)
    logs: tuple[list, list] = ([], [])
    fits, exempt = object(), object()
    caps = []
    for log, cls in zip(logs, (guards.PureFetchCap, twin.FetchCap), strict=True):
        replica = Script(log, "replica_of", [replica_id if replica_id is not None else -1])
        capped = Script(log, "capped", [ValueError("no budget")] if capped_raises else ["capped"])
        tag, at = fact_places(version)
        floors = Script(log, "floor", [floor])
        caps.append(cls(tagged_fields, FETCH, version, tag, at, floors, fits, exempt, capped, replica))
    assert outcome(caps[0], body) == outcome(caps[1], body)
    assert logs[0] == logs[1]


@settings(max_examples=300, deadline=None)
@given(size=st.integers(0, 3000), floor=FLOORS, trimmed=st.sampled_from([None, b"short", RuntimeError("x")]))
@example(size=500, floor=500, trimmed=b"t")
@example(size=500, floor=499.99, trimmed=b"t")
def test_budget_trim_answers_as_the_pure_one(size, floor, trimmed):
    body = memoryview(bytes(size))
    logs: tuple[list, list] = ([], [])
    answers = [
        outcome(cls(Script(log, "floor", [floor]), Script(log, "trim", [trimmed])), body)
        for log, cls in zip(logs, (guards.PureBudgetTrim, twin.BudgetTrim), strict=True)
    ]
    assert answers[0] == answers[1]
    assert logs[0] == logs[1]


@settings(max_examples=200, deadline=None)
@given(version=st.integers(4, 17), nodes=st.integers(0, 2), how=st.sampled_from([0, 0, 1, 2]), tag=st.integers(0, 2))
@example(version=17, nodes=2, how=0, tag=0)
def test_tag_rewrite_answers_as_the_pure_one(version, nodes, how, tag):
    body = cut(fetch_answer(version, nodes), how)
    logs: tuple[list, list] = ([], [])
    answers = [
        outcome(cls(tagged_fields, FETCH, version, tag, Script(log, "rewrite", [b"moved"])), body)
        for log, cls in zip(logs, (guards.PureTagRewrite, twin.TagRewrite), strict=True)
    ]
    assert answers[0] == answers[1]
    assert logs[0] == logs[1]


STEP = st.sampled_from([None, b"", b"first", b"second!", KeyError("k")])


@settings(max_examples=200, deadline=None)
@given(first=STEP, second=STEP)
def test_chained_answers_as_the_pure_one(first, second):
    body = memoryview(b"the broker's")
    logs: tuple[list, list] = ([], [])
    answers = [
        outcome(cls(Script(log, "first", [first]), Script(log, "second", [second])), body)
        for log, cls in zip(logs, (guards.PureChained, twin.Chained), strict=True)
    ]
    assert answers[0] == answers[1]
    assert logs[0] == logs[1]
    again = twin.Chained(lambda b: first, lambda b: type(b))  # the second step is given a view, as the pure one's
    if not isinstance(first, Exception):
        assert again(body) is memoryview


def test_the_twins_refuse_what_the_pure_ones_cannot_be_made_of():
    with pytest.raises(TypeError):
        twin.Chained(len)
    with pytest.raises(TypeError):
        twin.FetchCap(tagged_fields, "1", 3, -1, 0, float, 0, 0, len, len)
    with pytest.raises(TypeError):
        twin.BudgetTrim(float, len)(memoryview(b""), 1)
