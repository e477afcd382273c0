"""The C shell's inline ``Counted.bound_changed`` (native/shell.c's ``counted_bound_changed``) against the Python
method: the same connection state and listener counts after every change, the same errors, and any other
``bound_changed`` (a subclass's, one put on the class) called rather than done inline."""

from __future__ import annotations

import random

import pytest

import proxy.connection.shell  # noqa: F401  (configures the shell: Counted.bound_changed is handed over at import)
from proxy.connection.compiled import NATIVE
from proxy.connection.counted import Counted
from proxy.ops.metrics import BoundCounts

pytestmark = pytest.mark.skipif(NATIVE is None, reason="the connection extension is not built")


def counted() -> Counted:
    made = Counted.__new__(Counted)
    made._bound = BoundCounts()
    made.at_bound_since = None
    return made


def state(c: Counted) -> tuple:
    return (c.at_bound_since, c._bound.reached, c._bound.seconds)


def outcome(call):
    try:
        return ("ok", call())
    except Exception as exc:  # noqa: BLE001 (compared, type and message)
        return (type(exc), str(exc))


@pytest.mark.parametrize("seed", range(20))
def test_every_change_leaves_what_the_method_leaves(seed):
    rng = random.Random(seed)
    python, native = counted(), counted()
    now = rng.uniform(0, 1e6)
    for _ in range(200):
        now += rng.choice([0.0, rng.uniform(0, 0.01), rng.uniform(0, 5)])
        value = rng.choice([now, int(now), now, now])
        assert outcome(lambda: python.bound_changed(value)) == outcome(lambda: NATIVE.bound_changed(native, value))
        assert state(python) == state(native)
    assert python._bound.reached > 50


def test_errors_are_the_methods_and_leave_what_it_leaves():
    python, native = counted(), counted()
    for c in (python, native):
        c.at_bound_since = 10.0
    got = [outcome(lambda: python.bound_changed("later")), outcome(lambda: NATIVE.bound_changed(native, "later"))]
    assert got[0] == got[1] and got[0][0] is TypeError
    assert state(python) == state(native) == (10.0, 0, 0.0)
    del python._bound, native._bound
    got = [outcome(lambda: python.bound_changed(11.0)), outcome(lambda: NATIVE.bound_changed(native, 11.0))]
    assert got[0] == got[1] and got[0][0] is AttributeError


def test_another_bound_changed_is_called_not_done_inline(monkeypatch):
    calls = []

    class Watched(Counted):
        __slots__ = ()

        def bound_changed(self, now: float) -> None:
            calls.append(("subclass", now))

    watched = Watched.__new__(Watched)
    watched._bound = BoundCounts()
    watched.at_bound_since = None
    assert NATIVE.bound_changed(watched, 1.0) is None
    assert calls == [("subclass", 1.0)] and state(watched) == (None, 0, 0.0)

    plain = counted()
    monkeypatch.setattr(Counted, "bound_changed", lambda self, now: calls.append(("replaced", now)))
    assert NATIVE.bound_changed(plain, 2.0) is None
    assert calls[-1] == ("replaced", 2.0) and state(plain) == (None, 0, 0.0)
    monkeypatch.undo()
    assert NATIVE.bound_changed(plain, 3.0) is None  # the class's own again: inline
    assert calls[-1] == ("replaced", 2.0) and state(plain) == (3.0, 1, 0.0)
