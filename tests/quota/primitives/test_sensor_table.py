"""The sensor table's order (quota.primitives.sensor_table): a record moves its sensor to the back at most once a step, and
expiry still drops exactly the sensors idle past the expiration (at most a step late when many recorded since their
move are ahead of an idle one and the call has a limit). Manual times, no sleeping."""

import random

from quota.primitives.entity import QuotaTags
from quota.primitives.sensor_table import MOVE_STEPS, SKIP_MAX, SensorTable

HOUR_MS = 3_600_000
STEP_MS = HOUR_MS // MOVE_STEPS


class Sensor:
    def __init__(self, name: str, now_ms: int) -> None:
        self.tags = self.representative = QuotaTags("", name)
        self.last_record_ms = now_ms


def record(table: SensorTable, sensor: Sensor, now_ms: int) -> None:
    table.touch(sensor, now_ms)
    sensor.last_record_ms = now_ms


def names(table: SensorTable) -> list[str]:
    return [tags.client_id for tags in table.sensors]


def test_a_record_moves_its_sensor_back_at_most_once_a_step():
    table = SensorTable(HOUR_MS)
    a, b = Sensor("a", 0), Sensor("b", 0)
    table.add(a, 0)
    table.add(b, 0)
    record(table, a, STEP_MS - 1)
    assert names(table) == ["a", "b"]  # within a step of its last move: not relinked
    record(table, a, STEP_MS)
    assert names(table) == ["b", "a"]


def test_expiry_without_a_limit_drops_exactly_the_idle_ones():
    rng = random.Random(5)
    table, now, live = SensorTable(HOUR_MS), 0, {}
    for _ in range(20_000):
        now += rng.choice((0, 1, 1000, STEP_MS // 3, STEP_MS, HOUR_MS // 7))
        name = f"c-{rng.randrange(200)}"
        if rng.random() < 0.05:
            table.expire(now)
            live = {n: s for n, s in live.items() if now - s.last_record_ms <= HOUR_MS}
            assert sorted(names(table)) == sorted(live)
        elif name in live:
            record(table, live[name], now)
        else:
            live[name] = Sensor(name, now)
            table.add(live[name], now)


def test_a_limited_expiry_never_drops_an_active_one_and_is_at_most_a_step_late():
    table = SensorTable(HOUR_MS)
    ahead = [Sensor(f"a-{i}", 0) for i in range(SKIP_MAX + 5)]
    for s in ahead:
        table.add(s, 0)
    idle = Sensor("idle", 1)
    table.add(idle, 1)
    for s in ahead:
        record(table, s, STEP_MS - 1)  # recorded since their move, not moved: all ahead of the idle one
    now = HOUR_MS + 2  # the idle one is past the hour, the others are not
    assert table.expire(now, limit=2) == 0 and "idle" in names(table)  # gives up past SKIP_MAX of them
    assert table.expire(now) == 1 and "idle" not in names(table)  # a call without a limit finds it
    assert len(table) == len(ahead)
    table.add(idle := Sensor("idle", now), now)
    later = STEP_MS - 1 + HOUR_MS + 1  # those ahead are now idle too: a limited call drops them, then it
    dropped = 0
    while n := table.expire(later, limit=2):
        dropped += n
    assert dropped == len(ahead) and names(table) == ["idle"]
