"""IncrementalAlterConfigs of the BROKER resource "" (what kafka-configs.sh --entity-type brokers --entity-default
sends) through the proxy, against Tansu: an admin's proxy settings apply, anyone else gets
CLUSTER_AUTHORIZATION_FAILED, and a request mixing a proxy setting with a TOPIC resource is answered per resource
(the topic's by Tansu). Sent with kafka-python's own protocol classes on its admin client's connection
(KafkaAdminClient's alter_configs takes a BROKER resource only by broker id, never "")."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.harness import wait_until
from tests.integration.quota_apis import send, start
from tests.integration.raw import hold_open

pytestmark = pytest.mark.integration

BROKER, TOPIC = 4, 2
NONE, CLUSTER_AUTHORIZATION_FAILED = 0, 31


def alter(*resources, validate_only: bool = False):
    from kafka.protocol.admin import IncrementalAlterConfigsRequest as R

    return R(
        version=1,
        validate_only=validate_only,
        resources=[
            R.AlterConfigsResource(
                resource_type=kind,
                resource_name=name,
                configs=[
                    R.AlterConfigsResource.AlterableConfig(name=k, config_operation=0, value=v)
                    for k, v in configs.items()
                ],
            )
            for kind, name, configs in resources
        ],
    )


def describe_proxy(*names):
    from kafka.protocol.admin import DescribeConfigsRequest as R

    return R(
        version=4,
        include_synonyms=False,
        include_documentation=False,
        resources=[R.DescribeConfigsResource(resource_type=BROKER, resource_name="", configuration_keys=list(names))],
    )


def results(response) -> list:
    return [(r.resource_type, r.resource_name, r.error_code) for r in response.responses]


def outcomes(proxy, n: int) -> list[str]:
    """What ``n`` client connections opened one after another and held open get ("served", or "closed" by the
    connection limits); all are closed afterwards, and the proxy has seen them close before this returns."""

    async def scenario():
        got, writers = await hold_open(proxy.port, "127.0.0.1", n)
        for writer in writers:
            writer.close()
        return got

    got = asyncio.run(scenario())
    wait_until(
        lambda: proxy.metric("kafka_quota_proxy_active_connections", listener="PLAINTEXT") == 0,
        10,
        "the test's connections closed",
    )
    return got


def test_an_admin_sets_max_connections_and_a_mixed_request_is_answered_per_resource():
    proxy, broker = start(["User:ANONYMOUS"])
    try:
        assert outcomes(proxy, 3) == ["served"] * 3
        response = send(
            proxy.bootstrap, alter((TOPIC, "orders", {"retention.ms": "60000"}), (BROKER, "", {"max.connections": "2"}))
        )
        assert results(response) == [(TOPIC, "orders", NONE), (BROKER, "", NONE)]
        wait_until(lambda: outcomes(proxy, 3) == ["served", "served", "closed"], 10, "max.connections 2 in force")
        [result] = send(proxy.bootstrap, describe_proxy("max.connections")).results
        assert [(c.name, c.value, c.config_source) for c in result.configs] == [("max.connections", "2", 3)]
    finally:
        proxy.stop()
        broker.stop()


def test_a_principal_not_in_admin_principals_is_refused_its_proxy_resource_only():
    proxy, broker = start([])
    try:
        response = send(
            proxy.bootstrap, alter((BROKER, "", {"max.connections": "1"}), (TOPIC, "orders", {"retention.ms": "60000"}))
        )
        assert results(response) == [(BROKER, "", CLUSTER_AUTHORIZATION_FAILED), (TOPIC, "orders", NONE)]
        assert "admin_principals" in response.responses[0].error_message
        time.sleep(1)  # what a follower needs to apply a written record (about a second): nothing must apply
        assert outcomes(proxy, 2) == ["served", "served"]
    finally:
        proxy.stop()
        broker.stop()
