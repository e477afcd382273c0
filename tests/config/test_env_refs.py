"""``${env:NAME}`` in the configuration (Kafka's EnvVarConfigProvider form): a plain scalar that is wholly a reference
takes the value read as a YAML scalar, a reference inside text (or quoted) is replaced as text, an unset variable is
an error naming the key path and the variable."""

import pytest

from config.errors import ConfigError
from config.loader import load_config_text

SIDECAR = """
upstream:
  bootstrap_servers: ["${env:BROKER_HOST}:9092"]
listeners:
  - name: CLIENT
    bind: "0.0.0.0:${env:PROXY_PORT}"
volume_usage:
  publisher:
    broker_id: ${env:KAFKA_NODE_ID}
    log_dirs: [/var/lib/kafka/data]
    interval_seconds: ${env:INTERVAL}
    soft_limit: {type: MinFreePercentage, level: 20}
    hard_limit: {type: MinFreePercentage, level: 5}
"""
ENV = {"BROKER_HOST": "kafka-0.kafka", "PROXY_PORT": "19092", "KAFKA_NODE_ID": "4", "INTERVAL": "2.5"}


def test_a_whole_reference_takes_the_value_as_a_yaml_scalar():
    cfg = load_config_text(SIDECAR, ENV)
    assert cfg.volume_usage.publisher.broker_id == 4  # an int, as if written 4
    assert cfg.volume_usage.publisher.interval_seconds == 2.5
    assert str(cfg.upstream.bootstrap_servers[0]) == "kafka-0.kafka:9092"  # inside text: substituted as text
    assert cfg.listeners[0].bind.port == 19092


def test_the_same_file_serves_every_pod():
    ids = {
        load_config_text(SIDECAR, {**ENV, "KAFKA_NODE_ID": str(n)}).volume_usage.publisher.broker_id for n in (3, 4, 5)
    }
    assert ids == {3, 4, 5}


@pytest.mark.parametrize(
    "value,expected",
    [
        ("7", 7),
        ("true", True),
        ("1.5e+3", 1500.0),
        ("1e3", "1e3"),
        ("0x10", 16),
        ("a,b", "a,b"),
        ("null", None),
        ("", ""),
        ("${env:OTHER}", "${env:OTHER}"),
        ("- item", "- item"),
        ("k: v", "k: v"),
    ],
)
def test_the_value_is_read_as_one_plain_scalar_and_never_expanded_again(value, expected):
    text = SIDECAR + "dynamic_config:\n  topic: ${env:V}\n"
    if isinstance(expected, str) and expected:
        assert load_config_text(text, {**ENV, "V": value, "OTHER": "no"}).dynamic_config.topic == expected
    else:  # not a topic name: the error shows the value as read
        with pytest.raises(ConfigError, match=rf"^dynamic_config.topic: expected a topic name, got {expected!r}$"):
            load_config_text(text, {**ENV, "V": value})


def test_a_quoted_reference_stays_text():
    text = SIDECAR.replace("broker_id: ${env:KAFKA_NODE_ID}", 'broker_id: "${env:KAFKA_NODE_ID}"')
    with pytest.raises(ConfigError, match=r"volume_usage.publisher.broker_id: expected an integer, got '4'"):
        load_config_text(text, ENV)


def test_an_unset_variable_names_the_key_path_and_the_variable():
    env = {k: v for k, v in ENV.items() if k != "KAFKA_NODE_ID"}
    with pytest.raises(ConfigError) as error:
        load_config_text(SIDECAR, env)
    assert str(error.value) == (
        "volume_usage.publisher.broker_id: ${env:KAFKA_NODE_ID}: the environment variable KAFKA_NODE_ID is not set"
    )
    env = {k: v for k, v in ENV.items() if k != "BROKER_HOST"}
    with pytest.raises(ConfigError, match=r"^upstream.bootstrap_servers\[0\]: .*BROKER_HOST is not set"):
        load_config_text(SIDECAR, env)


@pytest.mark.parametrize("bad", ["${env:1X}", "${env:}", "${env:A-B}", "${env:X"])
def test_a_malformed_reference_is_an_error(bad):
    text = SIDECAR.replace('"${env:BROKER_HOST}:9092"', f'"{bad}:9092"')
    with pytest.raises(ConfigError, match=r"^upstream.bootstrap_servers\[0\]: .*must be followed by a variable name"):
        load_config_text(text, ENV)


def test_keys_and_text_without_references_are_untouched():
    text = SIDECAR + 'dynamic_config:\n  topic: "$HOME-{x}-$"\n'
    assert load_config_text(text, ENV).dynamic_config.topic == "$HOME-{x}-$"


def test_the_process_environment_is_the_default(monkeypatch):
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    assert load_config_text(SIDECAR).volume_usage.publisher.broker_id == 4
