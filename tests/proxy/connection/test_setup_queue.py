"""Admitted connections waiting for their setup (proxy.connection.setup_queue): taken in turn by network, then by
address, oldest first; past capacity the flood's oldest are shed, never a lone client while a longer queue exists."""

from __future__ import annotations

import pytest

from proxy.connection.setup_queue import SetupQueue, network_of


def drain(queue: SetupQueue) -> list:
    """Every item in the order set up, each done at once."""
    out = []
    while (taken := queue.pop()) is not None:
        network, item = taken
        queue.done(network)
        out.append(item)
    return out


@pytest.mark.parametrize(
    "ip,network",
    [
        ("127.0.0.1", "127.0.0.0/24"),
        ("10.1.2.250", "10.1.2.0/24"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8::1", "2001:db8:0:0::/64"),
        ("::1", "0:0:0:0::/64"),
        ("fe80::1%eth0", "fe80:0:0:0::/64"),
        ("?", "?"),
    ],
)
def test_an_address_is_served_in_turn_with_its_ipv4_24_or_ipv6_64(ip, network):
    assert network_of(ip) == network


def test_one_address_is_first_come_first_served():
    queue: SetupQueue[int] = SetupQueue(100, 8)
    for n in range(5):
        assert queue.push("10.0.0.1", n) == []
    assert len(queue) == 5
    assert drain(queue) == [0, 1, 2, 3, 4]
    assert len(queue) == 0 and queue.pop() is None


def test_a_newcomer_from_another_network_is_next_after_a_flood_from_thousands_of_addresses():
    """The attack of issue 44: 4,096 addresses in 16 /24s, one connection each waiting; a client from elsewhere
    arrives last and is served within the first 17, not after the 4,096."""
    queue: SetupQueue[str] = SetupQueue(10_000, 8)
    flood = [f"127.1.{i // 256}.{i % 256}" for i in range(4096)]
    for ip in flood:
        queue.push(ip, ip)
    queue.push("127.0.0.250", "newcomer")
    assert drain(queue).index("newcomer") <= 16


def test_a_client_sharing_a_network_with_a_flood_takes_every_other_turn_in_it():
    queue: SetupQueue[str] = SetupQueue(10_000, 8)
    for n in range(1000):
        queue.push("127.0.0.1", f"flood-{n}")
    queue.push("127.0.0.250", "newcomer")
    served = drain(queue)
    assert served.index("newcomer") == 1  # after the flood's oldest, before the rest of it
    assert [s for s in served if s != "newcomer"] == [f"flood-{n}" for n in range(1000)]  # the flood in its order


def test_networks_and_addresses_take_turns():
    queue: SetupQueue[str] = SetupQueue(100, 8)
    for item, ip in [
        ("a1", "10.0.0.1"),
        ("a2", "10.0.0.1"),
        ("b1", "10.0.0.2"),
        ("c1", "10.9.9.9"),
        ("c2", "10.9.9.9"),
    ]:
        queue.push(ip, item)
    # network 10.0.0 (addresses .1 and .2 in turn), then 10.9.9, then 10.0.0 again...
    assert drain(queue) == ["a1", "c1", "b1", "c2", "a2"]


def test_past_capacity_the_oldest_of_the_longest_queues_are_shed_and_a_lone_client_never():
    queue: SetupQueue[str] = SetupQueue(64, 8)
    queue.push("192.168.5.7", "lone")
    queue.push("127.0.0.250", "newcomer")  # shares a network with the flood
    shed: list[str] = []
    for n in range(1000):
        shed += queue.push("127.0.0.1", f"flood-{n}")
    assert len(queue) <= 64
    assert "lone" not in shed and "newcomer" not in shed
    assert len(shed) == 1002 - len(queue)
    assert shed[:3] == ["flood-0", "flood-1", "flood-2"]  # the oldest first: the likeliest gone already
    assert drain(queue)[:2] == ["lone", "newcomer"]  # each network, then each address in it, in turn


def test_at_capacity_only_the_addresses_holding_their_share_are_crowded():
    """A connection from a crowded address is closed at accept, before any other work; a client from elsewhere, or
    a quieter address of the flood's network, never is."""
    queue: SetupQueue[str] = SetupQueue(64, 8)
    queue.push("192.168.5.7", "lone")
    for n in range(40):
        queue.push("127.0.0.1", f"flood-{n}")
    assert not queue.crowded("127.0.0.1")  # below capacity: every connection waits its turn
    for n in range(40, 100):
        queue.push("127.0.0.1", f"flood-{n}")
    assert len(queue) >= queue.capacity - queue.capacity // 8
    while len(queue) < queue.capacity:
        queue.push("127.0.0.1", "more")
    assert queue.crowded("127.0.0.1")
    assert not queue.crowded("127.0.0.250")  # shares the flood's network: its own address has nothing waiting
    assert not queue.crowded("192.168.5.7")  # its network holds less than its share
    assert not queue.crowded("10.9.9.9")  # never seen
    queue.push("127.0.0.250", "newcomer")  # one waiting from a quieter address of the flood's network
    assert len(queue) <= queue.capacity and queue.crowded("127.0.0.1") == (len(queue) == queue.capacity)
    assert not queue.crowded("127.0.0.250")


def test_many_networks_past_capacity_shed_from_the_network_with_the_most():
    queue: SetupQueue[str] = SetupQueue(100, 8)
    queue.push("10.0.0.1", "lone")
    shed: list[str] = []
    for i in range(2000):  # 2,000 addresses in 8 networks
        shed += queue.push(f"172.16.{i % 8}.{i // 8 % 256}", f"flood-{i}")
    assert "lone" not in shed and len(queue) <= 100
    assert "lone" in drain(queue)


def test_room_is_made_by_shedding_an_eighth_of_the_longest_queues():
    queue: SetupQueue[str] = SetupQueue(1000, 8)
    queue.push("10.0.0.1", "lone")
    for n in range(80):
        queue.push("10.0.1.1", f"flood-{n}")
    shed = queue.make_room()
    assert shed == [f"flood-{n}" for n in range(10)] and len(queue) == 71
    assert SetupQueue(10, 8).make_room() == []
    with pytest.raises(ValueError):
        SetupQueue(0, 8)
    with pytest.raises(ValueError):
        SetupQueue(8, 0)


def test_a_network_has_at_most_per_network_under_way_and_the_others_are_taken_meanwhile():
    queue: SetupQueue[str] = SetupQueue(100, 2, per_address=2)
    for n in range(5):
        queue.push("127.0.0.1", f"flood-{n}")
    flood = ("127.0.0.0/24", "127.0.0.1")
    taken = [queue.pop(), queue.pop()]
    assert taken == [(flood, "flood-0"), (flood, "flood-1")]
    assert queue.pop() is None  # two under way: the flood waits for one to be done
    queue.push("10.0.0.7", "newcomer")
    assert queue.pop() == (("10.0.0.0/24", "10.0.0.7"), "newcomer")  # another network's turn comes at once
    queue.done(flood)
    assert queue.pop() == (flood, "flood-2")
    assert queue.pop() is None
    assert sorted(queue.drain()) == ["flood-3", "flood-4"] and len(queue) == 0 and queue.pop() is None


def test_an_address_has_at_most_half_its_networks_under_way_and_a_neighbour_is_taken_meanwhile():
    """A pod beside a flooding one on a node's /24: the flood's address keeps half the network's setups at most, so
    the neighbour's turn comes without waiting for the flood's setups to complete."""
    queue: SetupQueue[str] = SetupQueue(100, 8)
    assert queue.per_address == 4
    for n in range(20):
        queue.push("10.244.1.17", f"flood-{n}")
    flood = ("10.244.1.0/24", "10.244.1.17")
    assert [queue.pop() for _ in range(5)] == [(flood, f"flood-{n}") for n in range(4)] + [None]
    queue.push("10.244.1.18", "neighbour")
    assert queue.pop() == (("10.244.1.0/24", "10.244.1.18"), "neighbour")
    queue.done(flood)
    assert queue.pop() == (flood, "flood-4")
    with pytest.raises(ValueError):
        SetupQueue(100, 8, per_address=0)
