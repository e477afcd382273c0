"""Configuration: strict parsing, errors naming the key path, and the CLI's exit code 2."""

import dataclasses
import subprocess
import sys

import pytest

from config.errors import ConfigError
from config.loader import load_config_file, load_config_text, parse_config

BASE = """
upstream:
  bootstrap_servers: ["127.0.0.1:9092"]
listeners:
  - name: PLAINTEXT
    bind: "127.0.0.1:19092"
metrics:
  bind: "127.0.0.1:9464"
"""


def test_demo_config_loads():
    cfg = load_config_file("demo/demo.yaml")
    assert cfg.listeners[0].name == "PLAINTEXT"
    assert cfg.settings.socket_request_max_bytes == 104857600


@pytest.mark.parametrize("text,expected", [("", "auto"), ("auto", "auto"), ("off", "off"), ('"off"', "off")])
def test_connections_splice(text, expected):
    extra = f"settings:\n  connections.splice: {text}\n" if text else ""
    assert load_config_text(BASE + extra).settings.connections_splice == expected


@pytest.mark.parametrize("text", ["on", "true", "yes-please", "1"])
def test_connections_splice_refuses_anything_but_auto_or_off(text):
    with pytest.raises(ConfigError, match="settings.connections.splice: expected auto or off, got"):
        load_config_text(BASE + f"settings:\n  connections.splice: {text}\n")


def test_base_config_and_defaults():
    cfg = load_config_text(BASE)
    assert str(cfg.upstream.bootstrap_servers[0]) == "127.0.0.1:9092"
    assert cfg.listeners[0].bind.port == 19092
    assert cfg.settings.shutdown_grace_period_ms == 10000


@pytest.mark.parametrize(
    "text,message",
    [
        (BASE.replace('"127.0.0.1:19092"', '"19092"'), "listeners[0].bind: expected host:port, got '19092'"),
        (BASE + "extra: 1\n", "extra: unknown key"),
        (
            BASE.replace('    bind: "127.0.0.1:19092"', '    bind: "127.0.0.1:19092"\n    colour: red'),
            "listeners[0].colour: unknown key",
        ),
        (
            BASE + "settings:\n  socket.request.max.bytes: 5\n",
            "settings.socket.request.max.bytes: must be between 1024",
        ),
        (
            BASE + "settings:\n  socket.request.max.bytes: lots\n",
            "settings.socket.request.max.bytes: expected a number",
        ),
        (BASE + "settings:\n  no.such.setting: 1\n", "settings.no.such.setting: unknown key"),
        (BASE.replace('["127.0.0.1:9092"]', "[]"), "upstream.bootstrap_servers: expected a non-empty list"),
        (
            BASE.replace("127.0.0.1:9092", "host:99999"),
            "upstream.bootstrap_servers[0]: port must be between 0 and 65535",
        ),
        ("listeners: []", "upstream: required key is missing"),
        (
            BASE.replace("metrics:", '  - name: PLAINTEXT\n    bind: "127.0.0.1:19093"\nmetrics:'),
            "listeners[1].name: duplicate listener name",
        ),
        ("[not, a, mapping]", "expected a mapping"),
        ("a: [", "not valid YAML"),
    ],
)
def test_bad_config_names_key_and_reason(text, message):
    with pytest.raises(ConfigError) as err:
        load_config_text(text)
    assert message in str(err.value)


def test_config_is_immutable():
    cfg = parse_config({"upstream": {"bootstrap_servers": ["a:1"]}, "listeners": [{"name": "X", "bind": "b:2"}]})
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.listeners[0].name = "Y"
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.settings.socket_request_max_bytes = 1  # type: ignore[misc]  # what the test checks: frozen
    with pytest.raises(TypeError):
        cfg.settings.values["socket.request.max.bytes"] = 1  # type: ignore[index]  # read-only, as checked
    with pytest.raises(TypeError):
        cfg.settings.max_connections_per_ip_overrides["10.0.0.1"] = 1  # type: ignore[index]  # read-only


def test_cli_exits_2_on_bad_config_and_starts_nothing(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(BASE.replace('"127.0.0.1:19092"', '"19092"'))
    result = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "run", "--config", str(bad)], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2
    assert "listeners[0].bind: expected host:port, got '19092'" in result.stderr


def test_cli_help_lists_every_subcommand():
    result = subprocess.run([sys.executable, "-m", "proxy.cli", "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0
    assert "run" in result.stdout and "check-config" in result.stdout


CLUSTER = BASE.replace(
    '    bind: "127.0.0.1:19092"',
    '    bind: "0.0.0.0:19092"\n    advertised_host: kafka-proxy.example.com\n    broker_port_base: 19100',
)


def test_cluster_mode_listener():
    lc = load_config_text(CLUSTER).listeners[0]
    assert lc.cluster_mode and lc.broker_port_base == 19100 and lc.advertised_host == "kafka-proxy.example.com"
    assert not load_config_text(BASE).listeners[0].cluster_mode


@pytest.mark.parametrize(
    "text,message",
    [
        (
            CLUSTER.replace("    advertised_host: kafka-proxy.example.com\n", ""),
            "listeners[0].advertised_host: required in cluster mode",
        ),
        (CLUSTER.replace("19100", "19000"), "listeners[0].broker_port_base: must be above the bootstrap port"),
        (CLUSTER.replace("19100", "70000"), "listeners[0].broker_port_base: expected a port number"),
        (
            BASE.replace('    bind: "127.0.0.1:19092"', '    bind: "127.0.0.1:19092"\n    advertised_host: x'),
            "listeners[0].advertised_host: only used in cluster mode",
        ),
    ],
)
def test_bad_cluster_mode_config(text, message):
    with pytest.raises(ConfigError) as err:
        load_config_text(text)
    assert message in str(err.value)


QUOTAS = (
    BASE
    + """quotas:
  - entity: {user: "<default>"}
    producer_byte_rate: 1048576
  - entity: {user: alice, client-id: etl}
    consumer_byte_rate: 4194304
"""
)


def test_quotas_section_builds_the_table():
    table = load_config_text(QUOTAS).quotas
    assert table.limit("producer_byte_rate", "bob", "x") == 1048576
    assert table.limit("consumer_byte_rate", "alice", "etl") == 4194304
    assert table.limit("consumer_byte_rate", "alice", "other") == float("inf")


@pytest.mark.parametrize(
    "replace,message",
    [
        (("producer_byte_rate: 1048576", "producer_byte_rate: -5"), "quotas[0].producer_byte_rate: expected a rate"),
        (("producer_byte_rate: 1048576", "producer_byte_rate: fast"), "quotas[0].producer_byte_rate: expected a rate"),
        (
            ("producer_byte_rate: 1048576", "request_percentage: 10"),
            "quotas[0].request_percentage: enforced by the brokers, not the proxy: set it with kafka-configs",
        ),
        (
            ("producer_byte_rate: 1048576", "colour: 10"),
            "quotas[0].colour: unknown quota key (known: producer_byte_rate",
        ),
        (
            ("consumer_byte_rate: 4194304", "producer_ids_rate: 10"),
            "quotas[1].producer_ids_rate: only for user entities (KIP-936)",
        ),
        (
            ("producer_byte_rate: 1048576", "controller_mutation_rate: 0"),
            "quotas[0].controller_mutation_rate: expected a rate in partition mutations per second > 0",
        ),
        (("{user: alice, client-id: etl}", "{user: alice, team: etl}"), "quotas[1].entity.team: unknown entity type"),
        (
            ("{user: alice, client-id: etl}", "{user: alice, group: etl}"),
            "quotas[1].entity.user: a group entity cannot be combined with user",
        ),
        (("{user: alice, client-id: etl}", '{user: "<default>"}'), "configured more than once"),
        (
            (
                "  - entity: {user: alice, client-id: etl}\n    consumer_byte_rate: 4194304\n",
                "  - entity: {user: carol}\n",
            ),
            "quotas[1]: no quota key given",
        ),
    ],
)
def test_bad_quotas_name_the_entry(replace, message):
    with pytest.raises(ConfigError) as err:
        load_config_text(QUOTAS.replace(*replace))
    assert message in str(err.value)


_BASE = 'upstream: {bootstrap_servers: ["a:1"]}\nlisteners: [{name: P, bind: "h:2"}]\n'


@pytest.mark.parametrize(
    "extra,message",
    [
        ("settings: {quota.window.num: .inf}", "settings.quota.window.num: expected a finite number"),
        ("settings: {quota.window.size.seconds: .nan}", "settings.quota.window.size.seconds: expected a finite number"),
        ("quotas: [{entity: {user: a}, producer_byte_rate: .inf}]", "quotas[0].producer_byte_rate: expected a rate"),
        (
            "quotas: [{entity: {user: a}, producer_byte_rate: 1.0e-300}]",
            "quotas[0].producer_byte_rate: expected a rate",
        ),
        ('upstream: {bootstrap_servers: ["b:1"]}', "upstream: given twice"),
        ("settings: {quota.window.num: 3, quota.window.num: 4}", "quota.window.num: given twice"),
        ("x: &a [1, 2]\ny: [*a, *a]", "YAML aliases (*a) are not allowed"),
        ("x: " + "[" * 100 + "]" * 100, "nested deeper than 32 levels"),
    ],
)
def test_hostile_or_absurd_configuration_is_one_clear_error(extra, message):
    with pytest.raises(ConfigError) as error:
        load_config_text(_BASE + extra)
    assert message in str(error.value)


def test_a_file_that_is_not_utf8_is_a_clear_error(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"upstream: \xff\xfe\n")
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        load_config_file(str(path))


def test_client_chosen_label_values_are_bounded_and_stay_unique():
    from proxy.ops.metric_labels import MAX_LABEL, label

    a, b = "x" * 32768 + "a", "x" * 32768 + "b"
    assert label("short") == "short"
    assert len(label(a)) <= MAX_LABEL and label(a) != label(b) and label(a) == label(a)


TWO_LISTENERS = """
upstream:
  bootstrap_servers: ["127.0.0.1:9092"]
listeners:
  - {name: EXTERNAL, bind: "127.0.0.1:19092"}
  - {name: INTERNAL, bind: "127.0.0.1:19093", internal: true}
"""


def test_connection_limits_from_settings_listeners_and_ip_quotas():
    cfg = load_config_text(
        TWO_LISTENERS
        + """
settings:
  max.connection.creation.rate: 100
  listener.name.EXTERNAL.max.connection.creation.rate: 20
  listener.name.INTERNAL.max.connections: 50
  max.connections: 1000
  max.connections.per.ip: 10
  max.connections.per.ip.overrides: "10.0.0.1:100, ::ffff:10.0.0.2:0"
quotas:
  - entity: {ip: "10.0.0.1"}
    connection_creation_rate: 5
  - entity: {ip: "<default>"}
    connection_creation_rate: 50
  - entity: {user: alice}
    producer_byte_rate: 1024
"""
    )
    limits = cfg.connections
    assert limits.max_connection_creation_rate == 100
    assert dict(limits.listener_creation_rates) == {"EXTERNAL": 20}
    assert dict(limits.listener_max_connections) == {"INTERNAL": 50}
    assert limits.max_connections == 1000 and limits.max_connections_per_ip == 10
    assert dict(limits.max_connections_per_ip_overrides) == {"10.0.0.1": 100, "10.0.0.2": 0}
    assert limits.ip_rate("10.0.0.1") == 5 and limits.ip_rate("10.9.9.9") == 50
    assert limits.internal_listener == "INTERNAL"
    assert cfg.quotas.limit("producer_byte_rate", "alice", "x") == 1024  # the user quotas are unaffected


def test_no_connection_limits_by_default():
    limits = load_config_text(BASE).connections
    assert limits.max_connection_creation_rate == float("inf") and limits.max_connections is None
    assert limits.max_connections_per_ip is None and not limits.ip_rates and limits.internal_listener is None


@pytest.mark.parametrize(
    "extra,message",
    [
        (
            "settings:\n  listener.name.OTHER.max.connections: 5\n",
            "settings.listener.name.OTHER.max.connections: no listener named 'OTHER'",
        ),
        (
            "settings:\n  listener.name.EXTERNAL.max.connection.creation.rate: 0\n",
            "settings.listener.name.EXTERNAL.max.connection.creation.rate: must be between 1",
        ),
        (
            'settings:\n  max.connections.per.ip.overrides: "10.0.0.1=5"\n',
            "settings.max.connections.per.ip.overrides: expected <ip>:<count>",
        ),
        (
            'settings:\n  max.connections.per.ip.overrides: "host.example:5"\n',
            "settings.max.connections.per.ip.overrides: not an IP address: 'host.example'",
        ),
        (
            "quotas:\n  - entity: {ip: 10.0.0.1, user: bob}\n    connection_creation_rate: 5\n",
            "quotas[0].entity.user: an ip entity cannot be combined with user",
        ),
        (
            "quotas:\n  - entity: {ip: not-an-ip}\n    connection_creation_rate: 5\n",
            "quotas[0].entity.ip: expected an IP address",
        ),
        (
            "quotas:\n  - entity: {ip: 10.0.0.1}\n    producer_byte_rate: 5\n",
            "quotas[0].producer_byte_rate: not a key of ip entities",
        ),
        (
            "quotas:\n  - entity: {user: bob}\n    connection_creation_rate: 5\n",
            "quotas[0].connection_creation_rate: only for ip entities",
        ),
        (
            "quotas:\n  - entity: {ip: 10.0.0.1}\n    connection_creation_rate: 5\n"
            '  - entity: {ip: "::ffff:10.0.0.1"}\n    connection_creation_rate: 6\n',
            "quotas[1].entity.ip: 10.0.0.1 is configured more than once",
        ),
        (
            "quotas:\n  - entity: {ip: 10.0.0.1}\n    connection_creation_rate: -1\n",
            "quotas[0].connection_creation_rate: expected a rate in connections per second",
        ),
    ],
)
def test_bad_connection_limits_name_the_key(extra, message):
    with pytest.raises(ConfigError) as info:
        load_config_text(TWO_LISTENERS + extra)
    assert message in str(info.value)


def test_only_one_listener_can_be_internal():
    text = TWO_LISTENERS.replace(
        '{name: EXTERNAL, bind: "127.0.0.1:19092"}', '{name: EXTERNAL, bind: "127.0.0.1:19092", internal: true}'
    )
    with pytest.raises(ConfigError, match=r"listeners\[1\].internal: only one listener can be internal"):
        load_config_text(text)


LOG_DIRS = (
    BASE
    + """
volume_usage:
  source: describe_log_dirs
  freshness_seconds: 60
  describe_log_dirs:
    interval_seconds: 15
    soft_limit: {type: MinFreePercentage, level: 20}
    hard_limit: {type: MinFreeBytes, level: 1073741824}
"""
)


def test_volume_usage_from_describe_log_dirs():
    volume = load_config_text(LOG_DIRS).volume_usage
    assert volume.source == "describe_log_dirs" and volume.publisher is None
    assert volume.describe_log_dirs.interval_seconds == 15
    assert volume.describe_log_dirs.hard_limit.type == "MinFreeBytes"


@pytest.mark.parametrize(
    "text,message",
    [
        (
            LOG_DIRS.replace("    interval_seconds: 15", "    interval_seconds: 60"),
            "volume_usage.describe_log_dirs.interval_seconds: must be below freshness_seconds",
        ),
        (
            LOG_DIRS.replace("  describe_log_dirs:\n", "  publisher: {}\n  describe_log_dirs:\n"),
            "volume_usage.publisher: only with source: topic",
        ),
        (
            BASE + "volume_usage:\n  source: describe_log_dirs\n",
            "volume_usage.describe_log_dirs: required with source: describe_log_dirs",
        ),
        (
            LOG_DIRS.replace("source: describe_log_dirs", "source: topic"),
            "volume_usage.describe_log_dirs: only with source: describe_log_dirs",
        ),
        (
            LOG_DIRS.replace("    soft_limit: {type: MinFreePercentage, level: 20}\n", ""),
            "volume_usage.describe_log_dirs.soft_limit: required key is missing",
        ),
    ],
)
def test_bad_describe_log_dirs_config(text, message):
    with pytest.raises(ConfigError) as info:
        load_config_text(text)
    assert message in str(info.value)
