"""The flow object (proxy.connection.flow): see test_flow_machine.py for the stateful property test."""

from proxy.connection.flow import THROTTLED_READ_BYTES, Flow


def test_a_client_held_on_a_timer_is_read_once_more_small_so_its_close_is_seen():
    """While a request waits on a lookup the client is not read; while it waits on a timer with the client watched
    (a held producer id), one small read is allowed, held back, and then reading stops until it is decided."""
    flow = Flow(10)
    flow.request_deciding()
    assert not flow.reading_client
    flow.request_decided()
    flow.request_deciding(watch_client=True)
    assert flow.reading_client and flow.read_size(1 << 20, 0) == THROTTLED_READ_BYTES
    flow.hold_back(b"next request bytes")
    assert not flow.reading_client  # one read, held back: no more until the hold ends
    flow.request_decided(watched=True)
    assert flow.read_ahead_due()
