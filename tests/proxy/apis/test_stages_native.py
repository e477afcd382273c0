"""The C twins of the reuse keys read for every Fetch and Produce (proxy/connection/native/stages.c's FetchInputs and
ProduceInputs) against proxy.apis.reuse's fetch_inputs and produce_inputs: the same scopes, sessions and headers,
drawn in every combination of what the functions read (shadow, topic and volume quotas on and off, topics named,
by id, several, guarded or not; objects missing what is read), give the same key or the same error. Skipped where
the extension is not built."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.apis.reuse import fetch_inputs, produce_inputs
from quota.primitives.compiled import load_compiled
from tests.twins import outcome

native, _ = load_compiled("proxy.connection._native")
if native is None:
    pytest.skip("the C extension is not built here (or the pure path is chosen)", allow_module_level=True)

TOPIC_ID = bytes(range(16))


class Topics:
    """What a scope's topics answer: a name for the id, or None (not known yet)."""

    def __init__(self, known: bool) -> None:
        self.known = known

    def name_for(self, topic_id):
        return "named" if self.known else None


@st.composite
def situations(draw):
    truth = st.sampled_from([True, False, 0, 1, "", "x"])
    volume = draw(st.sampled_from([None, "volume"]))
    quotas = SimpleNamespace(
        fetch=SimpleNamespace(shadow=draw(truth), keeper=SimpleNamespace(version=draw(st.integers(0, 3)))),
        topics=SimpleNamespace(fetch_enabled=draw(truth), produce_enabled=draw(truth)),
        volume=None if volume is None else SimpleNamespace(paused=draw(truth), throttling=draw(truth)),
        internal_topics=draw(st.sampled_from([frozenset(), frozenset({"__quota"})])),
    )
    scope = SimpleNamespace(
        quotas=quotas,
        guard=SimpleNamespace(topics=draw(st.sampled_from([frozenset(), frozenset({"__quota"})]))),
        topics=Topics(draw(st.booleans())),
    )
    header = SimpleNamespace(
        api_version=draw(st.integers(0, 13)),
        client_id=draw(st.sampled_from([None, "", "rdkafka"])),
        replica_id=draw(st.sampled_from([-1, 2])),
        only_topic=draw(st.sampled_from([None, "t", "__quota", TOPIC_ID])),
    )
    session = SimpleNamespace(user=draw(st.sampled_from(["", "alice"])))
    missing = draw(st.sampled_from([None, "quotas", "user", "only_topic", "guard", "api_version"]))
    for o in (scope, header, session):
        if missing is not None and hasattr(o, missing):
            delattr(o, missing)
    return scope, session, header


@settings(max_examples=400, deadline=None)
@given(situation=situations())
def test_the_twins_read_the_keys_the_pure_functions_read(situation):
    for pure, twin in (
        (fetch_inputs, native.FetchInputs(fetch_inputs)),
        (produce_inputs, native.ProduceInputs(produce_inputs)),
    ):
        assert outcome(twin, *situation) == outcome(pure, *situation)


def test_a_topic_named_by_id_goes_to_the_pure_function():
    calls = []

    def pure(scope, session, header):
        calls.append(header.only_topic)
        return "the pure function's"

    scope = SimpleNamespace(
        quotas=SimpleNamespace(topics=SimpleNamespace(produce_enabled=False), volume=None),
        guard=SimpleNamespace(topics=frozenset()),
    )
    header = SimpleNamespace(api_version=13, only_topic=TOPIC_ID)
    assert native.ProduceInputs(pure)(scope, SimpleNamespace(user=""), header) == "the pure function's"
    assert calls == [TOPIC_ID]
    header.only_topic = "t"
    assert native.ProduceInputs(pure)(scope, SimpleNamespace(user="u"), header) == (13, "t", "u")
    assert calls == [TOPIC_ID]
