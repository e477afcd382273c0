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


def test_a_throttled_produce_v5_is_answered_at_once_and_the_next_request_waits_for_the_mute():
    """Kafka >= 2.0 answers a throttled request of every version at once and mutes the channel until the throttle
    ends (``KafkaApis``: "Send the response immediately. In case of throttling, the channel has already been
    muted"); only a KIP-219 client backs off by itself. Produce v5 (before KIP-219) over its quota: its response
    reaches the client as soon as the broker's does, carrying throttle_time_ms, and the next request, already sent,
    reaches the broker only once the throttle has passed (the proxy used to hold the response instead, so a
    client whose request.timeout.ms was below the throttle resent a batch already appended)."""
    import struct

    from config.loader import parse_config
    from proxy.apis import ConnectionScope, Session
    from proxy.cluster.topics import Topics
    from proxy.codec.apis import PRODUCE
    from proxy.codec.header import encode_request_header, encode_response_header, frame
    from proxy.codec.messages import decode_response, encode_request, encode_response, new_request, new_response
    from proxy.connection.core import ConnectionCore
    from proxy.quotas.managers import ByteRateQuotas
    from quota.primitives.clock import ManualClock
    from tests.fakes import NULL_API_METRICS

    clock = ManualClock(1_000_000)
    config = parse_config({"upstream": {"bootstrap_servers": ["b:1"]}, "listeners": [{"name": "L", "bind": "h:2"}],
                           "quotas": [{"entity": {"client-id": "old"}, "producer_byte_rate": 1000}],
                           "settings": {"quota.window.num": 2}})
    scope = ConnectionScope(None, Topics(), ByteRateQuotas(config, clock))
    to_client, to_broker = bytearray(), bytearray()
    ns = lambda: clock.now_ms() * 1_000_000  # noqa: E731
    core = ConnectionCore(scope, Session("L", "127.0.0.1"), max_request_bytes=1 << 20, max_response_bytes=1 << 20,
                          max_inflight=5, write_client=to_client.extend, write_broker=to_broker.extend, clock=ns,
                          api_metrics=lambda key: NULL_API_METRICS)

    def produce(corr: int) -> bytes:
        body = encode_request(PRODUCE, 5, new_request(PRODUCE, 5, acks=1, timeout_ms=1000, topic_data=[
            {"name": "t", "partition_data": [{"index": 0, "records": bytes(4000)}]}]))
        return frame(encode_request_header(PRODUCE, 5, corr, "old") + body)

    def forwarded() -> list[int]:
        corrs = []
        while to_broker:
            size, _, _, corr = struct.unpack_from(">ihhi", to_broker)
            corrs.append(corr)
            del to_broker[:size + 4]
        return corrs

    # two requests sent back to back, as a client with more than one in flight does
    core.client_bytes(memoryview(produce(1) + produce(2)))
    core.step(ns())
    assert forwarded() == [1]  # 4 KB over a 1 KB/s quota (a burst of 1 KB): throttled, read no further
    core.broker_bytes(memoryview(frame(encode_response_header(PRODUCE, 5, 1) + encode_response(
        PRODUCE, 5, new_response(PRODUCE, 5)))))
    state = core.step(ns())
    size, corr = struct.unpack_from(">ii", to_client)
    assert corr == 1, "the throttled Produce v5 response was held instead of answered at once"
    throttle_ms = decode_response(PRODUCE, 5, bytes(to_client[8:size + 4])).throttle_time_ms
    assert throttle_ms > 1000
    assert not state.reading_client and state.deadline == ns() + throttle_ms * 1_000_000
    clock.advance(throttle_ms - 1)
    core.step(ns())
    assert forwarded() == []  # muted: the next request waits for the throttle
    clock.advance(1)
    core.step(ns())
    assert forwarded() == [2]
