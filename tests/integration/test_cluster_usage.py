"""``quota.scope: cluster`` on sidecars (issue 26): two sidecar proxies in front of one Tansu share the usage topic;
one tenant producing at full speed through both gets about its producer_byte_rate in total, against about 2 x
under ``broker`` (Kafka's per-broker quotas).

Tansu is a single broker advertising one address, ``localhost:P``. The two proxies stand for the sidecars of two
brokers: one listens on 127.0.0.1:P, the other on 127.0.0.2:P, and each tenant producer (aiokafka, a real client)
runs on an event loop whose name lookups send ``localhost`` to its own sidecar's address, as each broker's host
would. The proxies' own clients (the usage topic's publisher and follower) reach Tansu directly, as a sidecar's do.
Admitted bytes are what the producers had acknowledged, so the figures are what the proxies let through. Bounds are
generous (rates, not timings). Measured on this machine: 0.93-0.99 x under ``cluster`` (``quota.smoothing`` on, its
default with a usage topic; 0.81-0.95 x with it off), 1.87-1.91 x under ``broker``, each producer throttled 82-95 %
of the time. Below the lower bound the test fails only where a sidecar held its producer (throttled half the time or
more) to less than its part of the bound: on a loaded machine the producers may fall short by themselves (a full
run once measured 0.78 + 0.81 x under ``broker``), while usage counted twice or a throttle too long holds them
throughout (the ``cluster`` scope's sidecars hold theirs 85-103 % of the time). Then sidecar b stops: its
tombstone makes a forget it at once (no fallback); sidecar c joins and dies (no tombstone): a keeps to its
per-broker share once c's last record is older than ``quota.cluster.stale.ms``.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.harness import Tansu, free_port, start_proxy, wait_until
from tests.integration.clients import kp_create_topic
from tests.integration.cluster_sidecars import RATE, TOPIC, USAGE_TOPIC, SidecarLoop, sidecar_config

pytestmark = [pytest.mark.integration, pytest.mark.measures_rate]

WARM_UP_S = {
    "broker": 2.0,  # past the fresh entity's burst (quota x (num - 1) x window) and the throttle after it
    # (up to the window span, 2 s)
    "cluster": 4.0,
}  # quota.smoothing on, as by default with a usage topic: each sidecar admits a full
# bucket and more before it sees the other's usage, and both then pay that debt back (0.59 x measured over 2-5 s in a
# quiet make test with 2.0)
MEASURE_S = 3.0


def throttle_s(proxy) -> float:
    """Seconds of throttle the sidecar has applied to the tenant so far."""
    return proxy.metric(
        "kafka_quota_proxy_quota_throttle_time_seconds_total", quota="producer_byte_rate", user="", client_id="shared"
    )


def produce_flat_out(address: str, port: int, halt: threading.Event, acked: list) -> None:
    """One aiokafka producer bootstrapping through the sidecar at ``address``, as fast as it may until ``halt`` is
    set; each acknowledged message is appended to ``acked`` as (time, bytes)."""
    from aiokafka import AIOKafkaProducer

    value = b"v" * 4000

    async def main():
        producer = AIOKafkaProducer(
            bootstrap_servers=f"localhost:{port}",
            client_id="shared",
            acks=1,
            linger_ms=5,
            max_batch_size=16384,
            request_timeout_ms=30_000,
        )
        await producer.start()
        try:
            while not halt.is_set():
                future = await producer.send(TOPIC, value)
                future.add_done_callback(lambda f: f.exception() is None and acked.append((time.monotonic(), 4000)))
        finally:
            await producer.stop()

    loop = SidecarLoop(address)
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


@pytest.mark.parametrize("scope,low,high", [("cluster", 0.6, 1.5), ("broker", 1.6, 2.6)])
def test_one_tenant_through_two_sidecars_gets_its_quota_once_or_per_sidecar(scope, low, high):
    port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"localhost:{port}").start()
    proxies = []
    try:
        for host, name in (("127.0.0.1", "a"), ("127.0.0.2", "b")):
            proxies.append(start_proxy(sidecar_config(host, port, broker_port, scope, name), loop_kind="asyncio"))
        kp_create_topic(f"127.0.0.1:{port}", TOPIC, 2)
        acked: dict[str, list] = {"127.0.0.1": [], "127.0.0.2": []}
        halt = threading.Event()
        clients = [
            threading.Thread(target=produce_flat_out, args=(address, port, halt, into))
            for address, into in acked.items()
        ]
        for client in clients:
            client.start()
        try:  # the measurement counts from both producers' first acknowledgement, however long a busy machine
            # took to start them (counted from before their start, a burst and its throttle came late, into it)
            wait_until(lambda: all(acked.values()), 30, "both producers acknowledged")
            start = max(into[0][0] for into in acked.values())
            window = (start + WARM_UP_S[scope], start + WARM_UP_S[scope] + MEASURE_S)
            time.sleep(max(0.0, window[0] - time.monotonic()))  # deliberate: the measurement's start
            throttled = [throttle_s(p) for p in proxies]
            time.sleep(max(0.0, window[1] - time.monotonic()))  # deliberate: the measurement window
            held = [(throttle_s(p) - before) / MEASURE_S for p, before in zip(proxies, throttled)]
            time.sleep(0.3)  # deliberate: the window's last acknowledgements
        finally:
            halt.set()
            for client in clients:
                client.join(60)
        if scope == "cluster":
            received = [
                p.metric("kafka_quota_proxy_cluster_usage_records_total", direction="received") for p in proxies
            ]
            a = proxies[0]
            proxies.pop().stop()  # sidecar b leaves: its tombstone makes a forget it at once, with no fallback
            wait_until(lambda: a.metric("kafka_quota_proxy_cluster_usage_peers", state="known") == 0, 10, "a forgets b")
            assert a.metric("kafka_quota_proxy_cluster_usage_fallback") == 0
            # sidecar c joins, then dies (no tombstone): a stops counting it after quota.cluster.stale.ms (2 s)
            proxies.append(start_proxy(sidecar_config("127.0.0.2", port, broker_port, scope, "c"), loop_kind="asyncio"))
            wait_until(lambda: a.metric("kafka_quota_proxy_cluster_usage_peers", state="fresh") == 1, 15, "a sees c")
            proxies[-1].app.cluster_usage.leave_on_stop = False  # stands for a sidecar that died
            proxies.pop().stop()
            stopped = time.monotonic()
            wait_until(lambda: a.metric("kafka_quota_proxy_cluster_usage_fallback") == 1, 15, "a falls back")
            fell_back_after = time.monotonic() - stopped
            assert a.metric("kafka_quota_proxy_cluster_usage_peers", state="fresh") == 0
            assert fell_back_after > 1.0, f"a fell back {fell_back_after:.1f} s after c stopped, before c went stale"
    finally:
        for proxy in proxies:
            proxy.stop()
        broker.stop()
    per_sidecar = [
        sum(n for at, n in list(into) if window[0] <= at < window[1]) / MEASURE_S / RATE for into in acked.values()
    ]
    assert all(share > 0 for share in per_sidecar), f"a producer got nothing through: {per_sidecar}"
    total = sum(per_sidecar)
    gaps = [  # the longest wait for an acknowledgement in the window: a stall shows here, not in the throttle
        max(b - a for a, b in zip(at, at[1:])) if len(at) > 1 else MEASURE_S
        for at in (
            [window[0], *(t for t, _ in list(into) if window[0] <= t < window[1]), window[1]] for into in acked.values()
        )
    ]
    shares = [f"{share:.2f} x, held {h:.0%}, longest gap {g:.2f} s" for share, h, g in zip(per_sidecar, held, gaps)]
    print(f"quota.scope {scope}: {total:.2f} x producer_byte_rate in total ({shares})")
    assert total <= high, f"quota.scope {scope}: {total:.2f} x producer_byte_rate in total ({shares})"
    # below the lower bound only where no sidecar held its producer to less than its part of it: a producer the
    # machine slows falls short with little throttle; usage counted twice, or a throttle too long, holds it throughout
    held_back = [share < low / len(per_sidecar) and h >= 0.5 for share, h in zip(per_sidecar, held)]
    assert total >= low or not any(held_back), (
        f"quota.scope {scope}: {total:.2f} x producer_byte_rate in total ({shares}), held back by its sidecars"
    )
    if scope == "cluster":
        assert all(n > 0 for n in received), f"a sidecar recorded no peer usage: {received}"


def usage_topic_exists(broker_port: int) -> bool:
    from proxy.codec.apis import METADATA
    from tests.integration.raw import connect, exchange

    sock = connect(broker_port)
    try:
        answer = exchange(
            sock,
            METADATA,
            9,
            topics=[{"name": USAGE_TOPIC}],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    finally:
        sock.close()
    return [t.error_code for t in answer.topics] == [0]


def test_a_deleted_usage_topic_is_created_again_and_both_sidecars_share_again():
    """Issue 35: the usage topic deleted (straight at the broker, as an admin may) left both sidecars reading
    nothing, in fallback for good: Tansu takes the publishers' records under the deleted name and answers NONE. The
    followers see it gone, the publishers create it again, each sidecar reads the other's records again."""
    from proxy.codec.apis import DELETE_TOPICS
    from tests.harness import wait_until
    from tests.integration.raw import connect, exchange

    port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"localhost:{port}").start()
    proxies = []
    try:
        for host, name in (("127.0.0.1", "a"), ("127.0.0.2", "b")):
            proxies.append(start_proxy(sidecar_config(host, port, broker_port, "cluster", name), loop_kind="asyncio"))

        def received() -> list[float]:
            return [p.metric("kafka_quota_proxy_cluster_usage_records_total", direction="received") for p in proxies]

        wait_until(
            lambda: all(p.metric("kafka_quota_proxy_cluster_usage_peers", state="fresh") == 1 for p in proxies),
            20,
            "both sidecars see each other",
        )
        sock = connect(broker_port)
        try:
            deleted = exchange(sock, DELETE_TOPICS, 4, timeout_ms=5000, topic_names=[USAGE_TOPIC])
        finally:
            sock.close()
        assert [r.error_code for r in deleted.responses] == [0]
        wait_until(lambda: usage_topic_exists(broker_port), 20, f"{USAGE_TOPIC} created again")
        before = received()
        # each sidecar syncs every 200 ms: 10 more records of its peer are 2 s of following the new topic
        wait_until(
            lambda: all(now >= then + 10 for now, then in zip(received(), before)),
            20,
            "both sidecars reading each other's records again",
        )
        # the records a publisher could not send meanwhile arrive together, so the counts above can be reached
        # before a sidecar's next sync has looked at its peers again: out of fallback by then, or soon after
        wait_until(
            lambda: (
                [p.metric("kafka_quota_proxy_cluster_usage_fallback") for p in proxies] == [0, 0]
                and [p.metric("kafka_quota_proxy_cluster_usage_peers", state="fresh") for p in proxies] == [1, 1]
            ),
            5,
            "both sidecars out of fallback, each seeing the other fresh",
        )
    finally:
        for proxy in proxies:
            proxy.stop()
        broker.stop()
