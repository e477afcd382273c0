"""The admin listener in a running proxy, in front of Tansu (a second listener bound to port 0): every broker address
its Metadata names is the port it was given, and the proxy's ``configs`` alters a quota through it while the same
command through the tenants' listener is refused (PLAINTEXT, no admin_principals). Kafka's own kafka-configs through
sidecars in separate processes: tests/integration/kafka/test_shipped_configs.py."""

from __future__ import annotations

import pytest

from proxy.cli.configs import main as configs
from proxy.codec.apis import METADATA
from tests.harness import Tansu, free_port, proxy_config, start_proxy, wait_until
from tests.integration import raw
from tests.integration.quota_apis import described

pytestmark = pytest.mark.integration


def test_metadata_names_the_admin_listener_and_only_it_may_alter_quotas(capsys):
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    config = proxy_config(proxy_port, broker_port)
    config["listeners"].append({"name": "ADMIN", "bind": "127.0.0.1:0", "admin": True})
    config["dynamic_config"] = {}
    try:
        proxy = start_proxy(config)
    except BaseException:
        broker.stop()
        raise
    try:
        admin_port = proxy.app.listener_addresses["ADMIN"][1]
        with raw.connect(admin_port) as sock:
            brokers = raw.exchange(sock, METADATA, 9, topics=[], allow_auto_topic_creation=False).brokers
        assert brokers and {(b.host, b.port) for b in brokers} == {("127.0.0.1", admin_port)}
        with raw.connect(proxy_port) as sock:  # the tenants' listener: as the broker advertises it
            assert {b.port for b in raw.exchange(sock, METADATA, 9, topics=[]).brokers} == {proxy_port}
        alter = [
            "--alter",
            "--entity-type",
            "clients",
            "--entity-name",
            "etl",
            "--add-config",
            "producer_byte_rate=4096",
        ]
        assert configs(["--bootstrap-server", proxy.bootstrap, *alter]) == 1
        assert "User:ANONYMOUS may not alter quotas" in capsys.readouterr().err
        assert configs(["--bootstrap-server", f"127.0.0.1:{admin_port}", *alter]) == 0
        wait_until(
            lambda: described(proxy.bootstrap, {"client-id": "etl"}) == {"producer_byte_rate": 4096.0},
            30,
            "the quota altered through the admin listener in force",
        )
    finally:
        proxy.stop()
        broker.stop()
