"""The connection extension's attribute caches (GETATTR and SETATTR in proxy/connection/native/connection.h: a slot
read and set at its offset, keyed by the type and its version tag) against Python's own getattr and setattr, through
one call site each (the extension's attr_probe and setattr_probe) given objects of many types in turn: slotted
classes, a subclass whose slot is shadowed, a class changed after its slot was cached, __getattr__ and
__getattribute__ of their own, frozen dataclasses, unset slots, dict attributes. Skipped where the extension is not
built."""

from __future__ import annotations

import dataclasses

import pytest

from quota.primitives.compiled import load_compiled
from tests.twins import outcome

native, _ = load_compiled("proxy.connection._native")
if native is None:
    pytest.skip("the C extension is not built here (or the pure path is chosen)", allow_module_level=True)


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a=1, b=2):
        self.a, self.b = a, b


class Sub(Slotted):
    __slots__ = ("c",)


class Shadowing(Slotted):
    def __init__(self):
        Slotted.a.__set__(self, "the slot's")  # type: ignore[attr-defined]  # the slot under the property
        self.b = 2

    @property
    def a(self):
        return "the property's"


class Hooked:
    __slots__ = ("a",)

    def __getattr__(self, name):
        return f"hooked {name}"


class Everything:
    __slots__ = ("a",)

    def __getattribute__(self, name):
        return f"everything {name}"


@dataclasses.dataclass(frozen=True, slots=True)
class Frozen:
    a: int = 5


class Plain:
    def __init__(self):
        self.a = "in the dict"


def objects():
    unset = Slotted()
    del unset.a
    return [
        Slotted(),
        Sub(),
        Shadowing(),
        Hooked(),
        Everything(),
        Frozen(),
        Plain(),
        unset,
        Slotted(7, 8),
        slice(1, 2, 3),  # a C type's read-only members
        3,
        "s",
    ]


@pytest.mark.parametrize("name", ["a", "b", "c", "start"])
def test_reads_answer_as_getattr_whatever_types_come_in_turn(name):
    for _ in range(3):  # each type after each other, the cache filled and missed
        for first in objects():
            for second in objects():
                for o in (first, second, second):
                    assert outcome(native.attr_probe, o, name) == outcome(getattr, o, name)


def test_a_class_changed_after_its_slot_was_read_is_read_as_changed():
    class Changing:
        __slots__ = ("a",)

    o = Changing()
    o.a = "slot"
    assert native.attr_probe(o, "a") == "slot"
    descriptor = Changing.a
    Changing.a = property(lambda self: "a property now")  # the type's version tag changes
    assert native.attr_probe(o, "a") == o.a == "a property now"
    Changing.a = descriptor
    assert native.attr_probe(o, "a") == "slot"


def test_sets_do_what_setattr_does():
    for value in ("x", None, 0):
        for o in objects():
            for name in ("a", "b", "start"):
                mine, theirs = o, o
                if not isinstance(o, int | str | slice):
                    theirs = _copy(o)
                for _ in range(2):  # the second time through the cache the first filled
                    got = outcome(native.setattr_probe, mine, name, value)
                    expected = outcome(setattr, theirs, name, value)
                    assert (got[0], got[1] if got[0] == "error" else None) == (
                        expected[0],
                        expected[1] if expected[0] == "error" else None,
                    )
                if got[0] == "value" and not isinstance(o, Everything):
                    assert getattr(mine, name) == getattr(theirs, name) == value


def _copy(o):
    new = object.__new__(type(o))
    for name in ("a", "b", "c"):
        try:
            object.__setattr__(new, name, object.__getattribute__(o, name))
        except (AttributeError, TypeError, dataclasses.FrozenInstanceError):
            pass
    if isinstance(o, Plain):
        new.__dict__.update(o.__dict__)
    return new


def test_a_slot_set_again_drops_its_old_value():
    import sys

    o = Slotted()
    value = object()
    native.setattr_probe(o, "a", value)
    before = sys.getrefcount(value)
    native.setattr_probe(o, "a", "other")
    native.setattr_probe(o, "a", "other again")
    assert sys.getrefcount(value) == before - 1


class Methods:
    __slots__ = ("n",)

    def __init__(self):
        self.n = 0

    def add(self, k=1):
        self.n += k
        return ("Methods.add", self.n)

    @staticmethod
    def add_static(k=1):
        return ("static", k)


class MoreMethods(Methods):
    __slots__ = ()

    def add(self, k=1):
        return ("MoreMethods.add", k)


class WithDict:
    def add(self, k=1):
        return ("WithDict.add", k)


def with_dict_shadowed():
    o = WithDict()
    o.add = lambda k=1: ("the instance's own", k)
    return o


class Intercepting:
    __slots__ = ()

    def add(self, k=1):
        return ("never called by name", k)

    def __getattribute__(self, name):
        return lambda k=1: ("intercepted", name, k)


METHOD_OBJECTS = [Methods, MoreMethods, WithDict, with_dict_shadowed, Hooked, Intercepting, lambda: [1], Slotted]


@pytest.mark.parametrize("name", ["add", "add_static", "append", "missing"])
def test_method_calls_do_what_a_call_by_name_does_whatever_types_come_in_turn(name):
    def by_name(o, *args):
        return getattr(o, name)(*args)

    for args in ((), (5,)):
        for first in METHOD_OBJECTS:
            for second in METHOD_OBJECTS:
                for make in (first, second, second):  # each type after each other, the cache filled and missed
                    mine, theirs = make(), make()
                    assert outcome(native.method_probe, mine, name, *args) == outcome(by_name, theirs, *args)
                    if isinstance(mine, list | Methods):
                        assert (mine if isinstance(mine, list) else mine.n) == (
                            theirs if isinstance(theirs, list) else theirs.n
                        )


def test_a_method_replaced_after_its_call_was_cached_is_called_as_replaced():
    class Changing:
        __slots__ = ()

        def speak(self):
            return "before"

    o = Changing()
    assert native.method_probe(o, "speak") == "before"
    Changing.speak = lambda self: "after"  # the type's version tag changes
    assert native.method_probe(o, "speak") == "after"
