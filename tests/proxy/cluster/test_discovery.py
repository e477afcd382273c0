"""Cluster mode's broker discovery: ready only once every broker of the cluster is served on its port; a port that
cannot be opened (another process holds it) is tried again, and the proxy stays not ready meanwhile."""

from config.model import Address
from proxy.cluster.broker_ports import BrokerPorts
from proxy.cluster.discovery import BrokerDiscovery


class Ports:
    """The app's port opener: ``taken`` ports fail, as a bind to a port another process holds does."""

    def __init__(self, taken: set[int]) -> None:
        self.taken, self.open = taken, set()

    def __call__(self, node_id: int) -> bool:
        if node_id in self.taken:
            return False
        self.open.add(node_id)
        return True


def discovery(opener: Ports) -> tuple[BrokerDiscovery, BrokerPorts]:
    ports = BrokerPorts("PLAINTEXT", "proxy", 9100, opener)
    return BrokerDiscovery(
        None, [ports], timeout_s=1, refresh_s=30, removal_s=60, close_broker=lambda *a: None, now=lambda: 0.0
    ), ports


def test_a_port_that_cannot_be_opened_keeps_the_proxy_not_ready_and_is_tried_again():
    opener = Ports(taken={4})
    found, ports = discovery(opener)
    brokers = {3: Address("b3", 9092), 4: Address("b4", 9092), 10: Address("b10", 9092)}
    assert found.learn(brokers) is False and found.ready is False
    assert opener.open == {3, 10} and set(ports.brokers) == {3, 10}  # broker 4 not known: nothing forwards there
    assert ports.advertise(4, "b4", 9092) == ("proxy", 9104)  # clients are told its port all the same
    opener.taken.clear()  # the other process let the port go
    assert found.learn(brokers) is True and found.ready is True
    assert opener.open == {3, 4, 10} and [str(a) for a in ports.upstream_for(4)] == ["b4:9092"]


def test_every_port_open_is_ready_at_once():
    found, _ = discovery(Ports(taken=set()))
    assert found.learn({3: Address("b3", 9092)}) is True and found.ready is True
