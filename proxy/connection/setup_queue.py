"""Accepted connections waiting for their setup (their broker connection, the client socket wrapped), taken in turn by
network and by address, so that a flood of connections from a few places cannot make a client from elsewhere wait
behind it.

The kernel's accept queue is first come, first served: a tenant opening and closing connections flat out (each
sending a request first, so each must be served and costs a broker connection) fills it, and a newcomer from
elsewhere waited behind hundreds of them (issue 44: 3.2 s). The listener now takes what the kernel has queued at
once, and the connections wait here instead, where the next one set up is:

- from the next **network** in turn (an IPv4 /24, an IPv6 /64: one host or one tenant's subnet, which can hold many
  addresses), so a flood from 4,096 addresses of a few networks takes a few turns, not 4,096;
- within it, from the next **address** in turn, so a client sharing a network with a flood still gets its turn;
- from one address, oldest first.

The queue holds at most ``capacity`` connections (each costs a descriptor until it is set up or closed). Past it the
oldest connection of the address with the most waiting, in the network with the most waiting, is shed (closed
unserved, as a broker past its limits closes a connection): the flood pays for itself, a lone client is never the one
shed while a larger queue exists. And at most ``per_network`` connections of one network are being set up at once,
and half of them of one address, so a flood is served at the pace its own setups complete, what it sends after them
stays small beside the rest, and the others' turns come at once: those of another network, and those of another
address in the flood's own (a pod beside a flooding one on a node's /24) without waiting for the flood's setups. Pure: no sockets, no clock; the listener acts on what it returns.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")
Turn = tuple[str, str]  # a setup's network and address, counted under way until done


def network_of(ip: str) -> str:
    """The network an address is served in turn with: its IPv4 /24 or IPv6 /64 (``ip`` in canonical text, IPv4-mapped
    IPv6 already as IPv4). Anything else (a Unix socket, "?") is its own network."""
    if ":" in ip:
        groups = ip.split("%", 1)[0].split(":")
        if "" in groups:  # "::" shortens zeros: expand to 8 groups to find the first four
            at = groups.index("")
            tail = [g for g in groups[at:] if g]
            groups = groups[:at] + ["0"] * (8 - at - len(tail)) + tail
        return ":".join(groups[:4]) + "::/64"
    head, dot, _ = ip.rpartition(".")
    return f"{head}.0/24" if dot else ip


class _Network(Generic[T]):
    __slots__ = ("addresses", "waiting")

    def __init__(self) -> None:
        self.addresses: dict[str, deque[T]] = {}  # in turn order: the first is served next
        self.waiting = 0


class SetupQueue(Generic[T]):
    """Items (accepted connections) waiting, taken round-robin by network, then by address, oldest first; at most
    ``per_network`` of one network's taken and not yet :meth:`done` at once."""

    __slots__ = ("capacity", "per_network", "per_address", "_networks", "_size", "_under_way")

    def __init__(self, capacity: int, per_network: int, per_address: int | None = None) -> None:
        """``per_address``: of a network's under way, at most this many of one address (None: half, at least 1)."""
        if capacity < 1 or per_network < 1 or (per_address is not None and per_address < 1):
            raise ValueError("capacity, per_network and per_address must be at least 1")
        self.capacity = capacity
        self.per_network = per_network
        self.per_address = max(1, per_network // 2) if per_address is None else per_address
        self._networks: dict[str, _Network[T]] = {}  # in turn order: the first is served next
        self._size = 0
        self._under_way: dict[str, int] = {}  # network, and address -> items taken and not yet done

    def __len__(self) -> int:
        return self._size

    def push(self, ip: str, item: T) -> list[T]:
        """``item`` waits for its turn; returns the items shed to keep within capacity (the oldest of the longest
        queues)."""
        key = network_of(ip)
        network = self._networks.get(key)
        if network is None:
            network = self._networks[key] = _Network()
        queue = network.addresses.get(ip)
        if queue is None:
            queue = network.addresses[ip] = deque()
        queue.append(item)
        network.waiting += 1
        self._size += 1
        if self._size <= self.capacity:
            return []
        return self._shed(self.capacity - max(1, self.capacity // 8))

    def crowded(self, ip: str) -> bool:
        """At capacity, with ``ip`` holding at least an equal share of what waits (its network at least an equal share
        of the networks', ``ip`` of its network's): a connection from it just accepted would only push out another
        of the flood's, so it is closed at once, before any other work (the flood's connections cost the least CPU
        while they come faster than the proxy sets them up). A client from elsewhere, or a quieter address of the
        flood's network, is never crowded."""
        if self._size < self.capacity:
            return False
        network = self._networks.get(network_of(ip))
        if network is None or network.waiting * len(self._networks) < self._size:
            return False
        queue = network.addresses.get(ip)
        return queue is not None and len(queue) * len(network.addresses) >= network.waiting

    def make_room(self) -> list[T]:
        """An eighth of the items (at least one, if any wait) shed as past capacity: room for others (descriptors)."""
        return self._shed(self._size - max(1, self._size // 8)) if self._size else []

    def pop(self) -> tuple[Turn, T] | None:
        """The next item to set up and its turn (to tell :meth:`done` with), or None when nothing waits whose
        network has fewer than ``per_network`` under way and whose address fewer than ``per_address``."""
        under_way = self._under_way
        for key, network in self._networks.items():
            if under_way.get(key, 0) >= self.per_network:
                continue
            for ip, queue in network.addresses.items():  # at most per_network / per_address of them are full
                if under_way.get(ip, 0) < self.per_address:
                    item = queue.popleft()
                    self._taken(key, network, ip, queue)
                    for k in (key, ip):
                        under_way[k] = under_way.get(k, 0) + 1
                    return (key, ip), item
        return None

    def drain(self) -> list[T]:
        """Every item still waiting, taken at once (the listener closes)."""
        items = [item for network in self._networks.values() for queue in network.addresses.values() for item in queue]
        self._networks.clear()
        self._size = 0
        return items

    def done(self, turn: Turn) -> None:
        """An item of ``turn`` (its network and address) taken by :meth:`pop` is set up (or gone): another of them may
        be taken."""
        for key in turn:
            left = self._under_way[key] - 1
            if left:
                self._under_way[key] = left
            else:
                del self._under_way[key]

    def _taken(self, key: str, network: _Network[T], ip: str, queue: deque[T]) -> None:
        """One item gone from ``queue``: the address and the network go to the back of their turns (or away)."""
        self._size -= 1
        network.waiting -= 1
        del network.addresses[ip]
        if queue:
            network.addresses[ip] = queue
        del self._networks[key]
        if network.waiting:
            self._networks[key] = network

    def _shed(self, target: int) -> list[T]:
        """Down to ``target`` items (an eighth below what is allowed, so the scan of the networks is paid once per
        many pushes): each time the oldest item of the longest address queue of the network with the most waiting."""
        largest = [(-n.waiting, i, key) for i, (key, n) in enumerate(self._networks.items())]
        heapq.heapify(largest)
        shed: list[T] = []
        while self._size > target:
            _, order, key = heapq.heappop(largest)
            network = self._networks[key]
            ip, queue = max(network.addresses.items(), key=lambda entry: len(entry[1]))
            shed.append(queue.popleft())
            self._size -= 1
            network.waiting -= 1
            if not queue:
                del network.addresses[ip]
            if network.waiting:
                heapq.heappush(largest, (-network.waiting, order, key))
            else:
                del self._networks[key]
        return shed
