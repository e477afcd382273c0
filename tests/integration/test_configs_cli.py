"""``kafka-quota-proxy configs`` against Tansu through the proxy: every change goes as AlterClientQuotas or
IncrementalAlterConfigs (BROKER "") to the proxy, which checks admin_principals, so a tenant running the command is
refused with the server's message and nothing applies, while an admin's change does. Admin and tenant are told apart
by mTLS on one listener (client_auth: requested), the credentials given with --command-config as kafka-configs.sh
takes them. SASL end to end is not run here: Tansu has no SASL with memory storage, and the scripted SASL broker
(tests/sasl_broker.py) serves no config topic to write; the SASL properties are unit-tested
(tests/proxy/cli/test_command_config.py)."""

from __future__ import annotations

import pytest

from proxy.cli.configs import main as configs
from proxy.cli.quota_admin import NOT_SERVED, SETTINGS_NOT_SERVED
from tests.harness import Tansu, free_port, proxy_config, start_proxy, wait_until
from tests.tls_certs import Authority

pytestmark = pytest.mark.integration


def start(admins: list[str], tls: dict | None = None):
    """Sidecar mode (Tansu advertising the proxy): the proxy's own clients (config topic) reach Tansu directly, also
    when the listener speaks only TLS."""
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    config = proxy_config(proxy_port, broker_port)
    config["dynamic_config"] = {}
    config["admin_principals"] = admins
    if tls:
        config["listeners"][0]["tls"] = tls
    try:
        return start_proxy(config), broker
    except BaseException:
        broker.stop()
        raise


def shown(capsys, *argv: str) -> str:
    """What ``configs`` prints for ``argv`` (it must succeed): the proxy's answer as an operator reads it. The proxy
    describes the configuration its managers hold (a dynamic change reaches both in one step of its loop)."""
    capsys.readouterr()
    assert configs(list(argv)) == 0
    return capsys.readouterr().out


def test_an_admin_changes_quotas_and_settings_and_a_tenant_is_refused_with_the_servers_message(tmp_path, capsys):
    ca = Authority(tmp_path)
    server, admin = ca.server(), ca.client("admin", CN="admin")
    proxy, broker = start(
        ["User:admin"],
        {
            "certfile": server.cert,
            "keyfile": server.key,
            "cafile": ca.pem.cert,
            "client_auth": "requested",
            "principal_mapping_rules": "RULE:^CN=(.*?)$/$1/,DEFAULT",
        },
    )
    admin_props, tenant_props = tmp_path / "admin.properties", tmp_path / "tenant.properties"
    admin_props.write_text(
        f"security.protocol=SSL\nssl.ca.location={ca.pem.cert}\n"
        f"ssl.certificate.location={admin.cert}\nssl.key.location={admin.key}\n"
    )
    tenant_props.write_text(f"security.protocol=SSL\nssl.ca.location={ca.pem.cert}\n")
    as_admin = ["--bootstrap-server", proxy.bootstrap, "--command-config", str(admin_props)]
    as_tenant = ["--bootstrap-server", proxy.bootstrap, "--command-config", str(tenant_props)]
    try:
        assert (
            configs(
                [
                    *as_tenant,
                    "--alter",
                    "--entity-type",
                    "clients",
                    "--entity-name",
                    "tenant",
                    "--add-config",
                    "producer_byte_rate=1000000000000",
                ]
            )
            == 1
        )
        err = capsys.readouterr().err
        assert "CLUSTER_AUTHORIZATION_FAILED" in err and "User:ANONYMOUS may not alter quotas" in err
        assert (
            configs(
                [
                    *as_tenant,
                    "--alter",
                    "--entity-type",
                    "brokers",
                    "--entity-default",
                    "--add-config",
                    "quota.mode=shadow",
                ]
            )
            == 1
        )
        assert "User:ANONYMOUS may not alter the proxy's settings" in capsys.readouterr().err

        assert (
            configs(
                [
                    *as_admin,
                    "--alter",
                    "--entity-type",
                    "clients",
                    "--entity-name",
                    "etl",
                    "--add-config",
                    "producer_byte_rate=2048",
                ]
            )
            == 0
        )
        assert "producer_byte_rate: (unset) -> 2048" in capsys.readouterr().out
        assert configs([*as_admin, "--alter", "--entity-type", "proxy", "--add-config", "max.connections=100"]) == 0
        assert "max.connections: 2147483647 -> 100" in capsys.readouterr().out
        # anyone may describe
        proxy_settings = [*as_tenant, "--describe", "--entity-type", "brokers", "--entity-default"]
        wait_until(
            lambda: "max.connections=100 (dynamic)" in shown(capsys, *proxy_settings),
            10,
            "max.connections 100 in force",
            interval=0.5,
        )
        # the config topic is read in order: the tenant's attempts, made first, would be in force by now
        clients = shown(capsys, *as_tenant, "--describe", "--entity-type", "clients")
        assert clients.splitlines() == ["Quota configs for client-id etl are producer_byte_rate=2048"], clients
        assert "quota.mode=enforce (static or default)" in shown(capsys, *proxy_settings)
        # a value out of range is the server's INVALID_CONFIG, printed
        assert configs([*as_admin, "--alter", "--entity-type", "proxy", "--add-config", "max.connections=0"]) == 1
        assert "INVALID_CONFIG" in capsys.readouterr().err
    finally:
        proxy.stop()
        broker.stop()


def test_describe_lists_every_entity_of_a_type_and_deleting_an_unset_key_says_so(capsys):
    proxy, broker = start(["User:ANONYMOUS"])
    cli = ["--bootstrap-server", proxy.bootstrap]
    try:
        for kind, name, config in [
            ("ips", "10.0.0.9", "connection_creation_rate=3"),
            ("ips", None, "connection_creation_rate=7"),
            ("topics", None, "consumer_byte_rate=4096"),
            ("groups", "payments", "request_rate=5"),
            ("clients", "etl", "producer_byte_rate=2048"),
        ]:
            named = ["--entity-name", name] if name else ["--entity-default"]
            assert configs([*cli, "--alter", "--entity-type", kind, *named, "--add-config", config]) == 0
        partition = ["--entity-type", "topics", "--entity-name", "orders", "--entity-type", "partitions"]
        assert (
            configs([*cli, "--alter", *partition, "--entity-name", "3", "--add-config", "producer_byte_rate=1024"]) == 0
        )
        # the last written in force: the ones before too (the config topic is read in order); one connection a second
        # at most, under 127.0.0.1's connection_creation_rate of 7 (the default IP's)
        wait_until(
            lambda: (
                "Quota configs for partition 3, topic orders are producer_byte_rate=1024"
                in shown(capsys, *cli, "--describe", *partition)
            ),
            10,
            "the partition's producer_byte_rate 1024 (the last written) in force",
            interval=1.0,
        )
        assert "Quota configs for client-id etl are producer_byte_rate=2048" in shown(
            capsys, *cli, "--describe", "--entity-type", "clients"
        )
        assert shown(capsys, *cli, "--describe", "--entity-type", "topics").splitlines() == [
            "Quota configs for topic <default> are consumer_byte_rate=4096"
        ]
        assert shown(capsys, *cli, "--describe", *partition).splitlines() == [
            "Quota configs for partition 3, topic orders are producer_byte_rate=1024"
        ]
        assert shown(capsys, *cli, "--describe", "--entity-type", "groups").splitlines() == [
            "Quota configs for group payments are request_rate=5"
        ]
        ips = shown(capsys, *cli, "--describe", "--entity-type", "ips").splitlines()
        assert ips == [
            "Quota configs for ip 10.0.0.9 are connection_creation_rate=3",
            "Quota configs for ip <default> are connection_creation_rate=7",
        ]
        assert (
            configs(
                [
                    *cli,
                    "--alter",
                    "--entity-type",
                    "ips",
                    "--entity-name",
                    "10.0.0.9",
                    "--delete-config",
                    "producer_byte_rate",
                ]
            )
            == 1
        )
        assert "producer_byte_rate: not set for ip 10.0.0.9; nothing to delete" in capsys.readouterr().err
        assert configs([*cli, "--alter", "--entity-type", "proxy", "--delete-config", "quota.mode"]) == 1
        assert "quota.mode: not set dynamically" in capsys.readouterr().err
        assert proxy.metric("kafka_quota_proxy_dynamic_config_bad_records_total") == 0
        assert proxy.metric("kafka_quota_proxy_dynamic_config_entries") == 6  # nothing more was written
    finally:
        proxy.stop()
        broker.stop()


def test_a_server_without_the_client_quota_apis_is_named_as_such():
    """Tansu itself (advertising its own address): its ApiVersions lists neither client-quota API, and it closes the
    connection on DescribeConfigs of the BROKER resource."""
    port = free_port()
    broker = Tansu(port, advertised=f"127.0.0.1:{port}").start()
    cli = ["--bootstrap-server", f"127.0.0.1:{port}"]
    try:
        for argv, message in [
            (["--describe", "--entity-type", "ips"], NOT_SERVED),
            (
                ["--alter", "--entity-type", "users", "--entity-name", "a", "--add-config", "producer_byte_rate=5"],
                NOT_SERVED,
            ),
            (["--alter", "--entity-type", "proxy", "--add-config", "max.connections=5"], SETTINGS_NOT_SERVED),
        ]:
            import io
            from contextlib import redirect_stderr

            err = io.StringIO()
            with redirect_stderr(err):
                assert configs([*cli, *argv]) == 1
            assert message in err.getvalue()
    finally:
        broker.stop()
