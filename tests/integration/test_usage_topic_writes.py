"""Records written straight to the usage topic, at the broker, are judged, not trusted (issue 44, T8).

Whoever may write the usage topic (``__kafka_quota_proxy_usage``) past the proxy, at a broker whose ACLs let them,
could before give a tenant 5 x its quota with a negative usage, and make up 500 peers that cut a sidecar's tenants
to quota / 502. A sidecar (quota.scope cluster, in front of Tansu) is sent such records by a client talking to the
broker itself: the negative one is skipped as malformed (``cluster_usage_records{direction="error"}``), and the made-up
peers known stay within what one broker's cluster can have (``cluster_usage_peers{state="known"}``: at most 4).
"""

from __future__ import annotations

from quota.sharing.usage_delta import UsageDelta
from quota.sharing.usage_encoding import encode
from tests.harness import Tansu, free_port, start_proxy, wait_until
from tests.integration.cluster_sidecars import USAGE_TOPIC, sidecar_config
from tests.integration.raw import produce_at_broker


def write(broker_port: int, records: list[tuple[str, bytes]]) -> None:
    produce_at_broker(broker_port, USAGE_TOPIC, records)


def test_negative_usage_is_malformed_and_made_up_peers_stay_within_the_cluster():
    port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"localhost:{port}").start()
    try:
        proxy = start_proxy(sidecar_config("127.0.0.1", port, broker_port, "cluster", "a"), loop_kind="asyncio")
        try:

            def records(direction: str) -> float:
                return proxy.metric("kafka_quota_proxy_cluster_usage_records_total", direction=direction)

            wait_until(lambda: records("sent") >= 2, 20, "the sidecar publishing to the usage topic")
            errors = records("error")
            write(broker_port, [("forger", encode(UsageDelta("forger", produce=(("", "shared", -10_000_000.0),))))])
            wait_until(lambda: records("error") == errors + 1, 20, "the negative record skipped as malformed")
            received = records("received")
            write(
                broker_port,
                [
                    (f"made-up-{i}", encode(UsageDelta(f"made-up-{i}", produce=(("", "shared", 1.0),))))
                    for i in range(50)
                ],
            )
            wait_until(
                lambda: records("received") + records("skipped") >= received + 50, 20, "the made-up peers' records read"
            )
            sent = records("sent")
            wait_until(lambda: records("sent") >= sent + 2, 20, "two syncs more: the peers looked at again")
            known = proxy.metric("kafka_quota_proxy_cluster_usage_peers", state="known")
            assert 1 <= known <= 4, f"{known:.0f} peers known for a cluster of one broker"
        finally:
            proxy.stop()
    finally:
        broker.stop()
