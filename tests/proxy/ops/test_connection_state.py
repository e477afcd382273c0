"""The open connections' mute states and principals as /metrics shows them (proxy.ops.connection_state): real
flows driven by their events, read by a registry as a scrape reads it."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client import CollectorRegistry

from proxy.connection.flow import Flow
from proxy.ops.connection_state import ConnectionStateCollector
from proxy.session.session import Session

MUTE = "kafka_quota_proxy_connections_mute_state"
USERS = "kafka_quota_proxy_user_connections"


class Connection:
    """What the collector reads of a client connection: its listener, its flow, its session."""

    def __init__(self, listener: str, user: str) -> None:
        self.ctx = SimpleNamespace(name=listener)
        self.flow = Flow(max_inflight=5)
        self.session = Session(listener, "127.0.0.1")
        self.session.user = user


def connection(listener: str, user: str = "ANONYMOUS") -> Connection:
    return Connection(listener, user)


def registry(connections: set, listeners=("PLAIN", "SASL"), max_users: int = 100) -> CollectorRegistry:
    r = CollectorRegistry()
    r.register(ConnectionStateCollector(connections, list(listeners), max_users))
    return r


def samples(r: CollectorRegistry, name: str) -> dict[tuple, float]:
    return {
        tuple(sorted(s.labels.items())): s.value for family in r.collect() for s in family.samples if s.name == name
    }


def test_every_listener_has_a_not_muted_sample_at_zero_when_nothing_is_open():
    assert samples(registry(set()), MUTE) == {
        (("listener", "PLAIN"), ("state", "NOT_MUTED")): 0,
        (("listener", "SASL"), ("state", "NOT_MUTED")): 0,
    }
    assert samples(registry(set()), USERS) == {}


def test_a_muted_connection_counts_under_its_state_by_name_and_back_to_not_muted_when_the_mute_ends():
    quiet, muted = connection("PLAIN"), connection("PLAIN")
    conns = {quiet, muted}
    r = registry(conns)
    muted.flow.mute(now=0, mute_ms=1000)
    assert samples(r, MUTE) == {
        (("listener", "PLAIN"), ("state", "NOT_MUTED")): 1,
        (("listener", "PLAIN"), ("state", "MUTED_AND_THROTTLED")): 1,
        (("listener", "SASL"), ("state", "NOT_MUTED")): 0,
    }
    muted.flow.tick(1_000_000_000)  # the mute's deadline
    assert samples(r, MUTE)[(("listener", "PLAIN"), ("state", "NOT_MUTED"))] == 2
    assert (("listener", "PLAIN"), ("state", "MUTED_AND_THROTTLED")) not in samples(r, MUTE)


def test_several_reasons_are_one_state_named_as_in_the_logs():
    conn = connection("SASL")
    conn.flow.mute(now=0, mute_ms=1000)
    conn.flow.drain()
    assert samples(registry({conn}), MUTE)[(("listener", "SASL"), ("state", conn.flow.mute_state))] == 1
    assert conn.flow.mute_state == "MUTED_AND_THROTTLED_AND_DRAINING"


def test_connections_by_user_keep_the_busiest_and_sum_the_rest_under_other():
    conns = {connection("SASL", "alice") for _ in range(3)} | {connection("SASL", "bob") for _ in range(2)}
    conns |= {connection("SASL", "carol"), connection("PLAIN")}
    assert samples(registry(conns), USERS) == {
        (("listener", "SASL"), ("user", "alice")): 3,
        (("listener", "SASL"), ("user", "bob")): 2,
        (("listener", "SASL"), ("user", "carol")): 1,
        (("listener", "PLAIN"), ("user", "ANONYMOUS")): 1,
    }
    assert samples(registry(conns, max_users=3), USERS) == {
        (("listener", "SASL"), ("user", "alice")): 3,
        (("listener", "SASL"), ("user", "bob")): 2,
        (("listener", "SASL"), ("user", "__other__")): 1,
        (("listener", "PLAIN"), ("user", "__other__")): 1,
    }


def test_a_long_principal_is_cut_as_every_client_chosen_label():
    conn = connection("SASL", "u" * 300)
    (labels,) = samples(registry({conn}), USERS)
    assert len(dict(labels)["user"]) <= 128
