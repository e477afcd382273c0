"""A topic's byte rate under its ``producer_byte_rate`` (``entity: {topic: ...}``), measured through a sidecar in
front of Apache Kafka: two confluent-kafka producers, each with its own client id and connection, write one topic of
four partitions flat out, and the topic's total must stay within 0.95-1.05 of its quota (Kafka's own system-test
band for its client quotas): the quota is the topic's, so two writers share it, neither gets a quota of its own.

Below 0.95 x the test fails only where the quota held the writers: its throttles (summed per writer's connection)
covered at least HELD of the measurement. Writers flat out against this quota are held all the time (measured
0.97-0.98 in three runs, 0.99-1.00 with the quota at 0.85 x, as a proxy counting 18 % too many bytes
would hold them, the rate then 0.887 x). A broker the machine stalls is not the quota's doing: with Kafka stopped
(SIGSTOP) for 1 s in every 3, the topic read 0.852-0.855 x, held 0.69 of the time, and a CI run on a loaded machine
read 0.844 x here, in the first minute of a freshly started broker. The lower bound cannot tell an over-throttling
proxy from such stalls when both happen at once; then it passes and prints what it measured.

As in tests/integration/test_byte_rate.py, one-second windows (two of them) let the measurement span many of the
sampled rate's cycles in reasonable time, and it starts one window span after the producers do (a fresh sensor may
burst quota x (num - 1) x window first, as in Kafka).
"""

from __future__ import annotations

import time

import pytest

from tests.integration.flat_clients import Flat, ck_flat

pytestmark = [pytest.mark.integration, pytest.mark.measures_rate, pytest.mark.long_running(seconds=45)]

QUOTA = 1024 * 1024
WINDOWS = 2
VALUE = b"v" * 16384  # 64 records a second fill the quota: the writers' own Python (one record, one call and one
# callback each, in the test's process beside the in-process proxy) stays small on a loaded machine; with 1,000-byte
# records a run beside the rest of the suite measured 0.913 x
# The measurement: 18 window spans (36 s), after one of start-up. A W-second window can read above the quota by one
# burst (quota x (num - 1) windows = 1 s of it: what a sampled rate admits after a second the loaded machine stalled
# the writers) and two requests admitted but not yet paid for (4 partitions x 64 KiB each, 1/2 s of quota): 1.5 s
# over W. Over 24 s that is up to 1.0625 x, past the bound: beside the suite's other measurements 24 s read 1.012,
# 1.015, 1.022 and 1.037 x (16 s once read 1.077). Over 36 s at most 1.042 x.
SPANS = 18


# The share of the measurement the quota's throttles must cover before a rate below 0.95 x is its doing.
HELD = 0.9


def topic_quota(proxy, counter: str, topic: str) -> float:
    """The topic's ``kafka_quota_proxy_topic_quota_<counter>`` under its producer_byte_rate."""
    return proxy.metric(f"kafka_quota_proxy_topic_quota_{counter}", quota="producer_byte_rate", topic=topic)


def reading(proxy, topic: str) -> tuple[float, float, float]:
    """The topic's bytes counted and throttle seconds applied so far, and when they were read."""
    return (
        topic_quota(proxy, "bytes_total", topic),
        topic_quota(proxy, "throttle_time_seconds_total", topic),
        time.monotonic(),
    )


@pytest.mark.parametrize("upstream", ["kafka1"], indirect=True)
def test_two_producers_share_one_topic_quota(upstream):
    settings = {"quota.window.num": WINDOWS, "quota.window.size.seconds": 1}
    with upstream.topics(upstream.direct(""), "topic-rate", partitions=4) as (topic,):
        quotas = [{"entity": {"topic": topic}, "producer_byte_rate": QUOTA}]
        with upstream.sidecar(quotas, **settings) as proxy:
            writers = [Flat(ck_flat(proxy.bootstrap, topic, f"writer-{i}", VALUE)) for i in range(2)]
            with writers[0], writers[1]:
                started = time.monotonic()
                time.sleep(WINDOWS)  # deliberate: past the start-up burst
                b0, h0, t0 = reading(proxy, topic)
                time.sleep(SPANS * WINDOWS)  # deliberate: the measurement window (a rate group)
                b1, h1, t1 = reading(proxy, topic)
            rate = (b1 - b0) / (t1 - t0)
            held = (h1 - h0) / len(writers) / (t1 - t0)
            measured = f"the topic at {rate / QUOTA:.3f} x its quota over {t1 - t0:.1f} s, {t0 - started:.1f} s in"
            print(f"{measured}, its writers held {held:.2f} of the time")
            assert rate <= 1.05 * QUOTA, measured
            assert rate >= 0.95 * QUOTA or held < HELD, f"{measured} while it held its writers {held:.0%} of the time"
            assert all(w.acked for w in writers), "a writer had nothing acknowledged: the two did not share"
            throttled = topic_quota(proxy, "throttled_requests_total", topic)
            assert throttled > 0
