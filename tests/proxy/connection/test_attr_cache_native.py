"""The connection extension's attribute caches (GETATTR and SETATTR in proxy/connection/native/connection.h: a slot
read and set at its offset, a C type's getset called and its other members read through their descriptors, keyed by
the type and its version tag) against Python's own getattr and setattr, through one call site each (the extension's
attr_probe and setattr_probe) given objects of many types in turn: slotted classes, a subclass whose slot is
shadowed, a class changed after its slot was cached, __getattr__ and __getattribute__ of their own, frozen
dataclasses, unset slots, dict attributes, C types' getsets (with and without a setter, a getter that raises),
read-only object members, members of other kinds. Skipped where the extension is not built."""

from __future__ import annotations

import dataclasses
import types

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
    return [*python_typed(), *c_typed()]


def python_typed():
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


def _function():
    return None


HEADER = types.SimpleNamespace(correlation_id=7)


class ErrorSub(OSError):
    pass


def c_typed():
    """Objects of C types whose attributes are getset descriptors or members of several kinds."""
    released = memoryview(b"ab")
    released.release()
    return [
        complex(1, 2),  # real: a read-only double member
        _function,  # __name__: a getset with a setter; __module__: an object member that may be NULL (None)
        OSError(2, "gone"),  # errno: an object member
        ErrorSub(3, "sub"),
        memoryview(b"abc"),  # nbytes, obj: getsets without a setter
        released,  # its getsets raise
        native.InFlight(HEADER, 0, True),  # leg: the extension's own getset
        native.Responses.__new__(native.Responses),  # _flow: a read-only object member, unset
    ]


NAMES = ["a", "b", "c", "start", "real", "__name__", "__module__", "errno", "nbytes", "obj", "leg", "_flow"]


@pytest.mark.parametrize("name", NAMES)
def test_reads_answer_as_getattr_whatever_types_come_in_turn(name):
    for _ in range(3):  # each type after each other, the cache filled and missed
        for first in objects():
            for second in objects():
                for o in (first, second, second):
                    assert outcome(native.attr_probe, o, name) == outcome(getattr, o, name)


def test_a_subclass_of_a_c_type_changed_after_its_member_was_read_is_read_as_changed():
    class Changing(OSError):
        pass

    o = Changing(4, "x")
    assert native.attr_probe(o, "errno") == 4
    Changing.errno = property(lambda self: "a property now")  # the type's version tag changes
    assert native.attr_probe(o, "errno") == o.errno == "a property now"
    del Changing.errno
    assert native.attr_probe(o, "errno") == 4


def test_sets_of_c_types_getsets_and_members_do_what_setattr_does():
    """Each object made twice, one set through the cache and one by setattr; each twice (the cache filled, then used),
    values of the right type and of the wrong one, attributes with a setter, without one, and read-only members."""
    makers = [lambda: _copy_function(), lambda: OSError(2, "gone"), lambda: memoryview(b"abc"), lambda: slice(1, 2)]
    makers += [lambda: native.InFlight(HEADER, 0, True), lambda: native.Responses.__new__(native.Responses)]
    for value in ("x", None, 0, ("t",)):
        for make in makers:
            for name in ("__name__", "__module__", "errno", "nbytes", "start", "leg", "_flow"):
                mine, theirs = make(), make()
                for _ in range(2):
                    got = outcome(native.setattr_probe, mine, name, value)
                    expected = outcome(setattr, theirs, name, value)
                    assert (got[0], got[1] if got[0] == "error" else None) == (
                        expected[0],
                        expected[1] if expected[0] == "error" else None,
                    ), (make(), name, value)
                    assert outcome(getattr, mine, name) == outcome(getattr, theirs, name)


def _copy_function():
    def f():
        return None

    return f


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
        for o in python_typed():
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
