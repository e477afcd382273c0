"""Connections held for their IP's rate (proxy.connection.held_queue): each out at its own time, in order, the
listener's one timer set again only when the first due changes. Pure."""

from __future__ import annotations

from proxy.connection.held_queue import HeldQueue


def test_items_come_out_at_their_time_in_order_and_the_first_due_is_told():
    held: HeldQueue[str] = HeldQueue()
    assert held.next_due() is None and held.due(10.0) == []
    assert held.push(5.0, "a") is True  # the first: the timer is set
    assert held.push(7.0, "b") is False  # later than the first: the timer stays
    assert held.push(6.0, "c") is False
    assert held.push(2.0, "d") is True  # earlier than the first: the timer is set again
    assert held.push(7.0, "e") is False
    assert (len(held), held.next_due()) == (5, 2.0)
    assert held.due(1.9) == []
    assert held.due(6.0) == ["d", "a", "c"]
    assert held.next_due() == 7.0
    assert held.drain() == ["b", "e"]  # same time: first held, first out
    assert len(held) == 0 and held.next_due() is None


def test_unorderable_items_held_at_the_same_time():
    held: HeldQueue[object] = HeldQueue()
    one, two = object(), object()
    held.push(1.0, one)
    held.push(1.0, two)
    assert held.due(1.0) == [one, two]
