"""The proxy's own Kafka traffic in front of a listener that requires SASL (``upstream.sasl``), against Apache Kafka's
SASL_PLAINTEXT listener of kafka1: the config topic is created, read and written (kafka-configs through the proxy),
and DescribeLogDirs answers the volume source, logged in with PLAIN or SCRAM-SHA-512; a wrong password is refused by
Kafka, the proxy runs on its YAML and says why without the password. Without ``upstream.sasl`` none of this could
reach a SASL-only broker (Tansu has no SASL, and the scripted SASL broker of the Tansu twins serves no topics)."""

from __future__ import annotations

import io
import logging
from contextlib import redirect_stdout

import pytest

from proxy.cli.configs import main as configs
from tests.harness import proxy_config, start_proxy, wait_until
from tests.integration.conftest import PLAIN_USERS, SCRAM_USERS
from tests.kafka_cluster import CONFIGS, unique_topic

pytestmark = pytest.mark.integration


def sasl_proxy_config(cluster, mechanism: str, user: str, password: str) -> dict:
    node = cluster.nodes[0]
    config = proxy_config(node.extra_advertised["SASL"], node.extra_ports["SASL"])
    config["listeners"][0].update(name="SASL", sasl=True)
    config["upstream"]["sasl"] = {"mechanism": mechanism, "username": user, "password": password}
    config["admin_principals"] = ["User:admin"]
    config["dynamic_config"] = {"topic": unique_topic("__kqp_sasl_configs")}
    config["volume_usage"] = {
        "source": "describe_log_dirs",
        "freshness_seconds": 10,
        "missing_data_action": "PAUSE",
        "describe_log_dirs": {
            "interval_seconds": 1,
            "soft_limit": {"type": "MinFreePercentage", "level": 1},
            "hard_limit": {"type": "MinFreePercentage", "level": 0.5},
        },
    }
    return config


def client_properties(tmp_path, user: str) -> str:
    path = tmp_path / f"{user}.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{PLAIN_USERS[user]}";\n'
    )
    return str(path)


@pytest.mark.parametrize(
    "mechanism,user,password",
    [("PLAIN", "admin", PLAIN_USERS["admin"]), ("SCRAM-SHA-512", "carol", SCRAM_USERS["carol"])],
)
def test_own_clients_log_in_to_read_and_write_the_config_topic_and_describe_log_dirs(
    kafka1, tmp_path, mechanism, user, password
):
    config = sasl_proxy_config(kafka1, mechanism, user, password)
    proxy = start_proxy(config)
    try:
        wait_until(
            lambda: proxy.metric("kafka_quota_proxy_dynamic_config_available") == 1,
            30,
            "the config topic created and read over SASL",
        )
        # DescribeLogDirs answered over SASL: the volume state leaves PAUSE (missing data) for OPEN
        wait_until(
            lambda: proxy.metric("kafka_quota_proxy_volume_state", state="OPEN") == 1,
            30,
            "volume usage from DescribeLogDirs over SASL",
        )
        client = unique_topic("own-sasl")
        kafka1.tool(
            CONFIGS,
            "--bootstrap-server",
            proxy.bootstrap,
            "--command-config",
            client_properties(tmp_path, "admin"),
            "--alter",
            "--entity-type",
            "clients",
            "--entity-name",
            client,
            "--add-config",
            "producer_byte_rate=4096",
        )

        def shown() -> str:
            """What the proxy describes for the client id (from the configuration its managers hold), asked over
            the SASL listener by the proxy's own configs command (a JVM per poll would be slow)."""
            out = io.StringIO()
            with redirect_stdout(out):
                assert (
                    configs(
                        [
                            "--bootstrap-server",
                            proxy.bootstrap,
                            "--command-config",
                            client_properties(tmp_path, "admin"),
                            "--describe",
                            "--entity-type",
                            "clients",
                            "--entity-name",
                            client,
                        ]
                    )
                    == 0
                )
            return out.getvalue()

        wait_until(
            lambda: f"Quota configs for client-id {client} are producer_byte_rate=4096\n" in shown(),
            15,
            "the quota written over SASL and followed back",
            interval=0.5,
        )
    finally:
        proxy.stop()


def test_a_wrong_password_is_refused_and_the_proxy_runs_on_its_yaml_saying_why(kafka1, caplog):
    secret = "not-carols-password"
    config = sasl_proxy_config(kafka1, "SCRAM-SHA-512", "carol", secret)
    caplog.set_level(logging.INFO)
    proxy = start_proxy(config)
    try:
        wait_until(
            lambda: any(
                "refused" in r.getMessage() or "Authentication failed" in r.getMessage() for r in caplog.records
            ),
            30,
            "the refused login logged",
        )
        assert proxy.metric("kafka_quota_proxy_dynamic_config_available") == 0
        assert proxy.metric("kafka_quota_proxy_volume_state", state="OPEN") == 0
        assert not any(secret in r.getMessage() for r in caplog.records)
    finally:
        proxy.stop()
