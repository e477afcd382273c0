"""What a byte-rate manager does for every request of a known client: a record and its decision
(``record_and_decide``), and a lower bound of the headroom (``remaining_floor``). Pure.

:class:`PureHotPaths` is the reference and the pure path; where the package's C extension is built, the manager
(:class:`quota.managers.client_quota.ClientQuotaManager`) is a class over its twin instead, ``quota.primitives._rate``'s
``HotPaths`` (quota/primitives/native/hot_paths.c), which takes the common case itself: a client whose sensor
:meth:`~quota.primitives.sensor_keeper.SensorKeeper.known` finds by one lookup of its names, no smoothing, no expiry
or move due, a plain :class:`~quota.primitives.sensor.ClientSensors` over the C rate (usage shared with peers is told
to the tap there too). In every other
case it calls this class's method of the same name, so each answers the same and leaves every sensor the same
(tests/quota/managers/test_hot_paths_native.py drives both through the same records, clocks and table changes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from quota.primitives import rate
from quota.primitives.decision import FORWARD, Decision
from quota.primitives.sensor import ClientSensors
from quota.primitives.sensor_keeper import SensorKeeper
from quota.primitives.sensor_table import SensorTable
from quota.primitives.usage_tap import NO_TAP

if TYPE_CHECKING:
    from quota.primitives.clock import Clock
    from quota.primitives.usage_tap import NoTap


class PureHotPaths:
    """The per-request methods of :class:`~quota.managers.client_quota.ClientQuotaManager`, over its attributes."""

    # what the methods read of the manager, set by its __init__ (the C twin's own fields, read without a lookup)
    __slots__ = ("keeper", "_clock", "smoothing", "tap", "quota_key")
    keeper: SensorKeeper[ClientSensors]
    _clock: Clock
    smoothing: bool  # quota.smoothing: on (a token bucket per entity decides the throttle); may change live
    tap: NoTap  # where local usage is also told when usage is shared with peers (quota.sharing.usage_share)
    quota_key: str

    if TYPE_CHECKING:  # the manager's, called here

        def _count(self, sensors: ClientSensors, user: str, client_id: str, value: float, now: int) -> None: ...
        def decided(self, sensors: ClientSensors, now: int) -> Decision: ...

    def record_and_decide(self, user: str, client_id: str, value: float, now_ms: int | None = None) -> Decision:
        """Record ``value`` (bytes) for this client, then decide (Kafka's ``recordAndGetThrottleTimeMs``, bounded by
        ``max_throttle_time_ms``): :data:`FORWARD` or a :class:`~quota.primitives.decision.Throttle` (reported to
        the client and the connection muted for the same time, as Kafka does; marked ``shadow`` if the manager or
        the matched quota entry is in shadow mode)."""
        now = self._clock.now_ms() if now_ms is None else now_ms
        sensors = self.keeper.for_record(user, client_id, now)
        if not self.smoothing:  # _count inline (sensors.record, the tap), with the check
            if sensors.entity is None:  # no quota applies: counted for its metrics, forwarded (as _decide finds it)
                sensors.record(value, now)
                return FORWARD
            within = sensors.record_within(value, now)  # sensors.record, then rate.surely_within
            if self.tap is not NO_TAP:  # told the value; it reads nothing of the rate
                self.tap.add(self.quota_key, sensors.tags, user, client_id, value, sensors.limit)
            if within:
                return FORWARD  # far below the quota: within it, not measured (as _decide finds it)
        else:
            self._count(sensors, user, client_id, value, now)
            if sensors.entity is not None and sensors.smooth is None and sensors.rate.surely_within(sensors.limit, now):
                return FORWARD  # far below the quota: within it, not measured (as _decide finds it)
        return self.decided(sensors, now)

    def remaining_floor(self, user: str, client_id: str) -> float:
        """A lower bound of ``remaining_in_quota_window`` until this client's next record, without the clock or a
        measurement (:meth:`Rate.headroom_floor`); 0.0 when not known so cheaply (smoothing on, a client not seen)."""
        sensors = None if self.smoothing else self.keeper.known(user, client_id)
        return 0.0 if sensors is None or sensors.entity is None else sensors.rate.headroom_floor(sensors.limit)


def _twin() -> type[PureHotPaths]:
    """The C twin when the rate's extension runs (quota.primitives.rate chose it), handed the pure methods it falls
    back on and what it compares with; else the pure class."""
    module = rate._TWIN
    if module is None:
        return PureHotPaths
    module.configure_hot_paths(
        PureHotPaths.record_and_decide,
        PureHotPaths.remaining_floor,
        FORWARD,
        NO_TAP,
        ClientSensors,
        SensorTable,
        SensorKeeper,
    )
    twin: type[PureHotPaths] = module.HotPaths
    return twin


if TYPE_CHECKING:  # typed as the pure class: the twin has its methods
    HotPaths = PureHotPaths
else:
    HotPaths = _twin()
