"""The observers freeze long-lived objects out of the cyclic collector's sight; garbage alive then is not frozen."""

import gc
import weakref

from proxy.observers.freezing import freeze_long_lived


class Node:
    pass


def test_cyclic_garbage_alive_at_a_freeze_is_collected_and_the_living_are_frozen():
    gc.collect()
    gc.unfreeze()
    gc.disable()  # no collection of its own between making the garbage and the freeze
    try:
        garbage = Node()
        garbage.me = garbage  # a cycle: reference counting alone never frees it
        gone = weakref.ref(garbage)
        del garbage
        kept = Node()
        kept.me = kept
        assert gone() is not None
        freeze_long_lived()
        assert gone() is None  # a bare gc.freeze() would have kept it, in the permanent generation, for good
        assert gc.get_freeze_count() > 0
        assert not any(o is kept for o in gc.get_objects())  # frozen: the collector no longer walks it
    finally:
        gc.unfreeze()
        gc.enable()
