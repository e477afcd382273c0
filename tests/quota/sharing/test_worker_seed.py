"""A restarted worker starts from a serving peer's quota state (issue 35), beyond the byte-rate samples: the
smoothing buckets, the KIP-599 mutation buckets, the KIP-936 producer-id buckets and known ids, and the KIP-612
connection-creation rates. In each test a tenant is at its limit on the survivor (which holds every worker's usage);
the newcomer takes the survivor's seed through JSON, as the link sends it, and then decides as the survivor does.
Without the seed the newcomer started empty and let the tenant through (a full bucket, an empty rate)."""

from __future__ import annotations

import json
import math
from types import MappingProxyType

from quota.managers.client_quota import ClientQuotaManager
from quota.managers.connection import Admit, ConnectionLimits, ConnectionQuotas, Hold
from quota.managers.mutation import ControllerMutationQuotaManager
from quota.managers.producer_id_decision import Hold as PidHold
from quota.managers.producer_ids import HOLD, THROTTLE, ProducerIdQuotaManager
from quota.primitives.clock import ManualClock
from quota.primitives.decision import FORWARD
from quota.primitives.entity import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow
from quota.sharing import worker_seed

WINDOW = QuotaWindow(11, 1)
START = 1_000_000
TABLE = QuotaTable.from_values(
    [
        (
            {"client-id": "storm"},
            {"producer_byte_rate": 1000, "consumer_byte_rate": 1000, "controller_mutation_rate": 2},
        ),
        ({"user": "<default>"}, {"producer_ids_rate": 10}),
    ]
)
IP_LIMITS = ConnectionLimits(ip_rates=MappingProxyType({"<default>": 5.0}), max_connection_creation_rate=20.0)


class Worker:
    """The quota managers a worker holds, on the shared clock (one monotonic clock across a host's processes)."""

    def __init__(
        self, clock: ManualClock, *, smoothing: bool = False, pid_enforcement: str = HOLD, expected_pids: int = 1000
    ) -> None:
        self.clock = clock
        self.produce = ClientQuotaManager(TABLE, PRODUCER_BYTE_RATE, clock, WINDOW, smoothing=smoothing)
        self.fetch = ClientQuotaManager(TABLE, CONSUMER_BYTE_RATE, clock, WINDOW, smoothing=smoothing)
        self.mutations = ControllerMutationQuotaManager(TABLE, clock, WINDOW)
        self.producer_ids = ProducerIdQuotaManager(
            TABLE,
            window_num=2,
            window_size_s=60,
            expected_pids=expected_pids,
            enforcement=pid_enforcement,
            max_hold_ms=10_000,
        )
        self.connections = ConnectionQuotas(["PLAINTEXT"], WINDOW, IP_LIMITS)

    def managers(self):
        return self.produce, self.fetch, self.mutations, self.producer_ids, self.connections

    def seed_from(self, peer: Worker) -> dict[str, int]:
        now = self.clock.now_ms()
        sent = json.dumps(worker_seed.collect(*peer.managers(), now))  # as the link sends it
        return worker_seed.install(json.loads(sent), *self.managers(), now)


def test_smoothing_buckets_are_seeded_so_a_tenant_in_debt_stays_throttled():
    clock = ManualClock(START)
    survivor = Worker(clock, smoothing=True)
    assert survivor.produce.record_and_get_throttle_time_ms("", "storm", 6000) == 5000  # 5 s of debt past 1 s burst
    clock.advance(1000)
    newcomer = Worker(clock, smoothing=True)
    newcomer.seed_from(survivor)
    expected = survivor.produce.record_and_get_throttle_time_ms("", "storm", 500)
    assert expected > 0  # unseeded, the newcomer's bucket was full: 500 bytes went through at once
    assert newcomer.produce.record_and_get_throttle_time_ms("", "storm", 500) == expected


def test_mutation_buckets_are_seeded_so_a_tenant_out_of_tokens_is_refused():
    clock = ManualClock(START)
    survivor = Worker(clock)
    assert survivor.mutations.admit("", "storm", [25]).all_admitted  # past the burst (2/s x 11 s): -3
    assert not survivor.mutations.admit("", "storm", [1]).all_admitted
    clock.advance(500)
    newcomer = Worker(clock)
    taken = newcomer.seed_from(survivor)
    assert taken["mutation"] == 1
    assert newcomer.mutations.tokens("", "storm") == survivor.mutations.tokens("", "storm") < 0
    expected = survivor.mutations.admit("", "storm", [1, 1])
    assert expected.admitted == (False, False) and expected.throttle is not None
    assert newcomer.mutations.admit("", "storm", [1, 1]) == expected  # unseeded: a full bucket of 22


def test_producer_id_buckets_are_seeded_so_a_user_out_of_tokens_is_held():
    clock = ManualClock(START)
    survivor = Worker(clock)
    now = clock.now_ms()
    for pid in range(20):  # the burst: 10 per window x 2 windows
        assert survivor.producer_ids.record_and_decide("tenant", pid, now) == FORWARD
    clock.advance(1000)
    newcomer = Worker(clock)
    assert newcomer.seed_from(survivor)["producer-id"] == 1
    now = clock.now_ms()
    expected = survivor.producer_ids.record_and_decide("tenant", 1000, now)
    assert isinstance(expected, PidHold) and expected.until_ms > now  # unseeded: FORWARD (a full bucket)
    assert newcomer.producer_ids.record_and_decide("tenant", 1000, now) == expected


def test_known_producer_ids_are_seeded_so_a_known_producer_is_not_charged_again():
    clock = ManualClock(START)
    survivor = Worker(clock, pid_enforcement=THROTTLE, expected_pids=8)  # exact up to 1 id, bits past that
    now = clock.now_ms()
    for pid in range(5):
        survivor.producer_ids.record_and_decide("tenant", pid, now)
    clock.advance(31_000)  # a second filter (half a window later) takes the next ids
    for pid in range(5, 7):
        survivor.producer_ids.record_and_decide("tenant", pid, clock.now_ms())
    clock.advance(1000)
    newcomer = Worker(clock, pid_enforcement=THROTTLE, expected_pids=8)
    newcomer.seed_from(survivor)
    now = clock.now_ms()
    counted = newcomer.producer_ids.new_pids_counted
    for pid in range(7):  # the same producers reconnecting to the newcomer: known, not new
        assert newcomer.producer_ids.record_and_decide("tenant", pid, now) == FORWARD
    assert newcomer.producer_ids.new_pids_counted == counted
    clock.advance(30_000)  # the first filter expires when the survivor's does: those ids are new again there too
    now = clock.now_ms()
    assert [newcomer.producer_ids.record_and_decide("tenant", pid, now) != FORWARD for pid in (0, 6)] == [
        survivor.producer_ids.record_and_decide("tenant", pid, now) != FORWARD for pid in (0, 6)
    ]


def test_a_cache_that_saw_ids_already_takes_the_peers_as_well():
    clock = ManualClock(START)
    survivor, newcomer = Worker(clock, pid_enforcement=THROTTLE), Worker(clock, pid_enforcement=THROTTLE)
    now = clock.now_ms()
    for pid in range(3):
        survivor.producer_ids.record_and_decide("tenant", pid, now)
    newcomer.producer_ids.record_and_decide("tenant", 100, now)
    newcomer.seed_from(survivor)
    counted = newcomer.producer_ids.new_pids_counted
    for pid in (0, 1, 2, 100):
        assert newcomer.producer_ids.record_and_decide("tenant", pid, now) == FORWARD
    assert newcomer.producer_ids.new_pids_counted == counted


def test_connection_creation_rates_are_seeded_so_an_ip_over_its_rate_is_held():
    clock = ManualClock(START)
    survivor = Worker(clock)
    for _ in range(10):  # 5/s for 10 s from one IP, and the proxy-wide rate with it
        for _ in range(5):
            assert survivor.connections.accept_delay_ms("PLAINTEXT", clock.now_ms()) == 0
            assert survivor.connections.admit("PLAINTEXT", "10.0.0.9", clock.now_ms()) == Admit()
        clock.advance(1000)
    newcomer = Worker(clock)
    assert newcomer.seed_from(survivor)["ip"] == 1
    now = clock.now_ms()
    assert newcomer.connections.proxy_accept_rate(now) == survivor.connections.proxy_accept_rate(now)
    assert newcomer.connections.ip_accept_rate("10.0.0.9", now) == survivor.connections.ip_accept_rate("10.0.0.9", now)
    decisions = []
    for quotas in (survivor.connections, newcomer.connections):
        got = []
        for _ in range(3):
            quotas.accept_delay_ms("PLAINTEXT", now)
            got.append(quotas.admit("PLAINTEXT", "10.0.0.9", now))
        decisions.append(got)
    assert any(isinstance(d, Hold) for d in decisions[0])  # unseeded: an empty rate admitted all three
    assert decisions[1] == decisions[0]


def test_the_seed_is_bounded_to_the_busiest_entities(monkeypatch):
    clock = ManualClock(START)
    survivor = Worker(clock)
    table = QuotaTable.from_values([({"client-id": "<default>"}, {"controller_mutation_rate": 1})])
    survivor.mutations = ControllerMutationQuotaManager(table, clock, WINDOW)
    for i in range(30):
        survivor.mutations.admit("", f"c{i}", [i + 1])
    monkeypatch.setattr(worker_seed, "MAX_SEED_ENTITIES", 5)
    rows = worker_seed.collect(*survivor.managers(), clock.now_ms())["mutation"]
    assert sorted(row[1] for row in rows) == [f"c{i}" for i in range(25, 30)]
    assert all(math.isfinite(row[3]) for row in rows)


def test_the_seed_in_parts_installs_as_the_whole(monkeypatch):
    """The link sends the state in small parts (the loop free between two); taken in one by one they leave the
    newcomer where the whole seed does."""
    monkeypatch.setattr(worker_seed, "PART_ROWS", 2)
    monkeypatch.setattr(worker_seed, "PID_PART_ROWS", 1)
    clock = ManualClock(START)
    survivor = Worker(clock)
    for i in range(5):
        survivor.produce.record_no_throttle("", "storm", 900)
        survivor.mutations.admit("", "storm", [3])
        survivor.producer_ids.record_and_decide(f"user-{i}", i, clock.now_ms())
        survivor.connections.admit("PLAINTEXT", f"10.0.0.{i}", clock.now_ms())
        clock.advance(300)
    whole, in_parts = Worker(clock), Worker(clock)
    whole.seed_from(survivor)
    parts = [json.loads(json.dumps(p)) for p in worker_seed.parts(*survivor.managers(), clock.now_ms)]
    assert len(parts) > 5 and parts[-1]["last"] and not any(p.get("last") for p in parts[:-1])
    for part in parts:
        worker_seed.install(part, *in_parts.managers(), clock.now_ms())
    now = clock.now_ms()
    assert in_parts.produce.stats_for("", "storm", now).rate == whole.produce.stats_for("", "storm", now).rate > 0
    assert in_parts.mutations.tokens("", "storm") == whole.mutations.tokens("", "storm") < 22
    assert [s.tokens for s in in_parts.producer_ids.stats(now)] == [s.tokens for s in whole.producer_ids.stats(now)]
    assert len(in_parts.producer_ids) == 5
    for i in range(5):
        ip = f"10.0.0.{i}"
        assert in_parts.connections.ip_accept_rate(ip, now) == whole.connections.ip_accept_rate(ip, now) > 0
    assert in_parts.connections.proxy_accept_rate(now) == whole.connections.proxy_accept_rate(now)
