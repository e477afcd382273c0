"""What the open connections are doing, as an operator sees it on /metrics: a producer over its quota is counted in
a muted state named as Kafka names it (``ChannelMuteState``: ``MUTED_AND_THROTTLED``), and back in ``NOT_MUTED``
once its throttle is over. kafka-python with default settings (five requests in flight, 16 KiB batches) against
Tansu; every wait is a condition on a scrape, with bounds far above the throttle."""

from __future__ import annotations

import pytest

from tests.harness import Tansu, free_port, proxy_config, proxy_in_front, wait_until
from tests.integration import clients as c

pytestmark = pytest.mark.integration

MUTE = "kafka_quota_proxy_connections_mute_state"
QUOTA = 20_000  # bytes/s: 200 KB sent at once is about 8 s over it, so the mutes last long enough to be scraped


def states(proxy) -> dict[str, float]:
    """The PLAINTEXT listener's open connections by mute state, as scraped."""
    return {
        dict(labels)["state"]: value
        for labels, value in proxy.scraped(MUTE).items()
        if dict(labels)["listener"] == "PLAINTEXT"
    }


def test_a_throttled_producer_is_counted_muted_and_throttled_then_not_muted():
    from kafka import KafkaProducer

    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    quotas = [{"entity": {"client-id": "muted"}, "producer_byte_rate": QUOTA}]
    config = proxy_config(
        proxy_port, broker_port, quotas=quotas, **{"quota.window.num": 2, "quota.window.size.seconds": 1}
    )
    with proxy_in_front(broker, config) as proxy:
        c.kp_create_topic(proxy.bootstrap, "muted", 1)
        wait_until(lambda: not any(states(proxy).values()), 30, "the admin's connections gone")
        producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, client_id="muted", acks=1)
        try:
            futures = [producer.send("muted", b"m" * 1000) for _ in range(200)]
            throttled = wait_until(
                lambda: [s for s, n in states(proxy).items() if n and "THROTTLED" in s],
                60,
                "the producer's connection counted in a throttled mute state",
            )
            assert all(s.startswith("MUTED_AND_") for s in throttled), throttled
            producer.flush(120)
            assert all(f.succeeded() for f in futures)
            # the throttle over, the producer's open connections are all NOT_MUTED again (none closed)
            wait_until(
                lambda: {s for s, n in states(proxy).items() if n} == {"NOT_MUTED"},
                60,
                "every open connection back to NOT_MUTED once its throttle ended",
            )
            open_now = proxy.scraped("kafka_quota_proxy_active_connections")[(("listener", "PLAINTEXT"),)]
            assert states(proxy)["NOT_MUTED"] == open_now >= 1
        finally:
            producer.close(10)
        assert (
            proxy.metric(
                "kafka_quota_proxy_quota_throttled_responses_total",
                quota="producer_byte_rate",
                user="",
                client_id="muted",
            )
            > 0
        )
