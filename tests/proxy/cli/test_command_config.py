"""``configs --command-config FILE``: Kafka client properties as kafka-configs.sh reads them, into kafka-python's
arguments; and the command line's own checks, made before anything is sent (exit code 2)."""

from __future__ import annotations

import pytest

from config.dynamic import PROXY_KEY
from proxy.cli.command_config import CommandConfigError, client_arguments, parse_properties, read_command_config
from proxy.cli.configs import added_config, build_parser, entity_args, entity_from_args, main, parse_add

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="s3cr=t;\\"x";'


def write(tmp_path, text: str) -> str:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return str(path)


def test_sasl_ssl_with_a_jaas_config_written_over_two_lines_as_kafka_writes_it(tmp_path):
    path = write(
        tmp_path,
        "# admin client\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism = SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="admin" \\\n'
        '    password="pw with spaces";\n'
        "ssl.ca.location: /etc/ca.pem\n"
        "ssl.endpoint.identification.algorithm=\n",
    )
    assert read_command_config(path) == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "admin",
        "sasl_plain_password": "pw with spaces",
        "ssl_cafile": "/etc/ca.pem",
        "ssl_check_hostname": False,
    }


def test_quoted_jaas_values_keep_their_escapes_and_separators():
    args = client_arguments(
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": JAAS}
    )
    assert (args["sasl_plain_username"], args["sasl_plain_password"]) == ("admin", 's3cr=t;"x')


def test_librdkafka_names_for_credentials_and_pem_files():
    args = client_arguments(
        {
            "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "plain",
            "sasl.username": "u",
            "sasl.password": "p",
            "client.id": "ops",
        }
    )
    assert args == {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "u",
        "sasl_plain_password": "p",
        "client_id": "ops",
    }
    args = client_arguments(
        {
            "security.protocol": "SSL",
            "ssl.ca.location": "ca.pem",
            "ssl.certificate.location": "me.pem",
            "ssl.key.location": "me.key",
            "ssl.key.password": "kp",
        }
    )
    assert args == {
        "security_protocol": "SSL",
        "ssl_cafile": "ca.pem",
        "ssl_certfile": "me.pem",
        "ssl_keyfile": "me.key",
        "ssl_password": "kp",
    }
    assert client_arguments({}) == {"security_protocol": "PLAINTEXT"}


@pytest.mark.parametrize(
    "props,reason",
    [
        ({"bootstrap.servers": "x"}, "bootstrap.servers: not a supported key"),
        ({"ssl.truststore.location": "/nonexistent/t.jks"}, "ssl.truststore.location: cannot read /nonexistent/t.jks"),
        ({"security.protocol": "TLS"}, "security.protocol: expected one of"),
        ({"security.protocol": "SASL_SSL", "sasl.username": "u", "sasl.password": "p"}, "sasl.mechanism"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.jaas.config": JAAS}, "sasl.mechanism"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "a username and password"),
        ({"security.protocol": "SSL", "sasl.mechanism": "PLAIN"}, "sasl.mechanism: only with security.protocol"),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": 'com.example.Login required username="a" password="b";',
            },
            "login module",
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a";',
            },
            "needs username",
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" '
                'password="b"',
            },
            "must end with ';'",
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": JAAS,
                "sasl.username": "x",
            },
            "not both",
        ),
        ({"ssl.endpoint.identification.algorithm": "dns"}, "expected https or empty"),
    ],
)
def test_what_cannot_be_used_is_an_error_naming_the_key(props, reason):
    with pytest.raises(CommandConfigError) as info:
        client_arguments(props)
    assert reason in str(info.value)


def test_a_key_given_twice_and_a_missing_file_are_errors(tmp_path):
    with pytest.raises(CommandConfigError, match="security.protocol: given twice"):
        parse_properties("security.protocol=SSL\nsecurity.protocol=PLAINTEXT\n")
    with pytest.raises(CommandConfigError, match="nope.properties"):
        read_command_config(str(tmp_path / "nope.properties"))


def test_list_values_in_square_brackets_as_kafka_configs_takes_them():
    assert parse_add("max.connections=5,max.connections.per.ip.overrides=[10.0.0.1:3,10.0.0.2:4]") == {
        "max.connections": 5,
        "max.connections.per.ip.overrides": "10.0.0.1:3,10.0.0.2:4",
    }


@pytest.mark.parametrize(
    "argv,reason",
    [
        (
            ["--alter", "--entity-type", "users", "--entity-name", "a"],
            "--add-config, --add-config-file or --delete-config",
        ),
        (["--alter", "--entity-type", "users", "--add-config", "producer_byte_rate=1"], "its --entity-name"),
        (
            ["--alter", "--entity-type", "brokers", "--entity-name", "1", "--add-config", "max.connections=1"],
            "--entity-default",
        ),
        (
            [
                "--alter",
                "--entity-type",
                "ips",
                "--entity-name",
                "1.2.3.4",
                "--entity-type",
                "users",
                "--entity-name",
                "a",
                "--add-config",
                "connection_creation_rate=1",
            ],
            "KIP-612",
        ),
        (["--alter", "--entity-type", "proxy", "--add-config", "log.retention.ms=1"], "not a proxy setting"),
        (["--alter", "--entity-type", "users", "--entity-name", "a", "--add-config", "mode=shadow"], "a number"),
        (["--describe", "--command-config", "/nonexistent/client.properties"], "--command-config"),
        (
            [
                "--alter",
                "--user",
                "a",
                "--entity-type",
                "clients",
                "--entity-name",
                "c",
                "--add-config",
                "producer_byte_rate=1",
            ],
            "do not go with --user, --client, --ip",
        ),
        (["--alter", "--user", "a", "--user-defaults", "--add-config", "producer_byte_rate=1"], "users given twice"),
        (["--alter", "--ip", "10.0.0.1", "--user", "a", "--add-config", "connection_creation_rate=1"], "KIP-612"),
        (
            ["--alter", "--user", "a", "--add-config-file", "/nonexistent/q.properties"],
            "--add-config-file: cannot read /nonexistent/q.properties",
        ),
    ],
)
def test_a_bad_command_line_exits_2_before_anything_is_sent(argv, reason, capsys):
    assert main(["--bootstrap-server", "127.0.0.1:1", *argv]) == 2  # port 1: nothing would answer
    assert reason in capsys.readouterr().err


@pytest.mark.parametrize(
    "line,reason",
    [
        (
            'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="s3cr3t-Pw;',
            "sasl.jaas.config: the value of password has no closing '\"' (an unterminated quote)",
        ),
        (
            'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin '
            'password="s3cr3t-Pw";',
            "sasl.jaas.config: cannot read the options after username=",
        ),
        (
            'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password=s3cr3t"-Pw;',
            "sasl.jaas.config: cannot read the options after password=",
        ),
        ("=s3cr3t-Pw", "line 3: no key before its '='"),
    ],
)
def test_a_bad_value_is_named_by_its_key_and_reason_and_the_secret_is_never_printed(tmp_path, capsys, line, reason):
    path = write(tmp_path, f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n{line}\n")
    assert main(["--bootstrap-server", "127.0.0.1:1", "--describe", "--command-config", path]) == 2
    err = capsys.readouterr().err
    assert reason in err
    assert "s3cr3t" not in err


@pytest.mark.parametrize(
    "argv,entity",
    [
        (["--user", "alice", "--client", "etl"], {"user": "alice", "client-id": "etl"}),
        (["--client", "etl", "--user", "alice"], {"user": "alice", "client-id": "etl"}),
        (["--user-defaults", "--client", "etl"], {"user": "<default>", "client-id": "etl"}),
        (["--client-defaults"], {"client-id": "<default>"}),
        (["--ip", "10.0.0.7"], {"ip": "10.0.0.7"}),
        (["--ip-defaults"], {"ip": "<default>"}),
        (["--broker-defaults"], PROXY_KEY),
        (
            ["--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-default"],
            {"user": "alice", "client-id": "<default>"},
        ),
    ],
)
def test_kafka_configs_shorthands_name_the_entity_the_entity_type_form_does(argv, entity):
    args = build_parser().parse_args(["--bootstrap-server", "b:1", "--alter", *argv, "--add-config", "k=1"])
    assert entity_from_args(*entity_args(args)) == entity


def test_add_config_file_takes_properties_as_add_config_takes_them(tmp_path):
    path = write(
        tmp_path,
        "# the quotas of etl\nproducer_byte_rate=1048576\nconsumer_byte_rate : 2.5e6\n"
        "max.connections.per.ip.overrides=[10.0.0.1:3,10.0.0.2:4]\n",
    )
    args = build_parser().parse_args(
        ["--bootstrap-server", "b:1", "--alter", "--client", "etl", "--add-config-file", path]
    )
    assert added_config(args) == {
        "producer_byte_rate": 1048576,
        "consumer_byte_rate": 2500000.0,
        "max.connections.per.ip.overrides": "10.0.0.1:3,10.0.0.2:4",
    }


def test_add_config_and_add_config_file_are_one_or_the_other_as_in_kafka_configs(capsys):
    with pytest.raises(SystemExit) as exited:  # argparse's usage error
        main(
            [
                "--bootstrap-server",
                "127.0.0.1:1",
                "--alter",
                "--user",
                "a",
                "--add-config",
                "producer_byte_rate=1",
                "--add-config-file",
                "q.properties",
            ]
        )
    assert exited.value.code == 2
    assert "--add-config-file: not allowed with argument --add-config" in capsys.readouterr().err
