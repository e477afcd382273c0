"""A bad configuration's errors all at once, each with its key path and reason, and a suggestion for a misspelt key
rather than a list of every key; ``check-config`` prints them all and exits 2."""

import subprocess
import sys

import pytest

from config.errors import ConfigError, ConfigErrors
from config.loader import load_config_text
from config.settings_table import SETTINGS

GOOD = """
upstream:
  bootstrap_servers: ["127.0.0.1:9092"]
listeners:
  - name: PLAIN
    bind: "127.0.0.1:19092"
"""

# one mistake in each section an operator edits, two in one list, three in one listener: every one must be reported
MANY = """
upstream:
  bootstrap_server: ["127.0.0.1:9092"]
listeners:
  - name: PLAIN
    bind: "127.0.0.1:19092"
    colour: red
  - name: "T L S"
    bind: "nowhere"
    internal: "yes"
settings:
  quota.window.nums: 3
  max.connections: -5
  listener.name.PLAIN.max.connection: 3
quotas:
  - entity: {user: alice}
    producer_byte_rates: 1024
  - entity: {ip: "<default>"}
    connection_creation_rate: 0
  - entity: {user: bob}
    consumer_byte_rate: 1024
usage_log: {dir: /tmp/u, max_files: 0}
admin_principals: [alice]
metric: {bind: "127.0.0.1:0"}
"""

EXPECTED = [
    "metric: unknown key; did you mean metrics?",
    "upstream.bootstrap_server: unknown key; did you mean bootstrap_servers?",
    "upstream.bootstrap_servers: required key is missing",
    "listeners[0].colour: unknown key (known keys: admin, advertised_host, bind, broker_port_base, internal, name, sasl, tls)",
    "listeners[1].internal: expected true or false, got 'yes'",
    "listeners[1].name: expected a listener name of letters, digits, '_' or '-', got 'T L S'",
    "listeners[1].bind: expected host:port, got 'nowhere'",
    "settings.quota.window.nums: unknown key; did you mean quota.window.num?",
    "settings.listener.name.PLAIN.max.connection: unknown key; did you mean listener.name.PLAIN.max.connections?",
    "settings.max.connections: must be between 1 and 2147483647, got -5",
    "quotas[0].producer_byte_rates: unknown quota key; did you mean producer_byte_rate?",
    "quotas[1].connection_creation_rate: expected a rate in connections per second > 0",
    "usage_log.max_files: expected an integer between 1 and 1e+06, got 0",
    "admin_principals[0]: expected a principal such as User:alice, got 'alice'",
]


def test_every_error_of_a_file_is_reported_together_section_by_section():
    with pytest.raises(ConfigErrors) as caught:
        load_config_text(MANY)
    said = [str(error) for error in caught.value.errors]
    assert len(said) == len(EXPECTED), "\n".join(said)
    for line, expected in zip(said, EXPECTED):
        assert line.startswith(expected), (line, expected)
    assert str(caught.value).startswith(f"{len(EXPECTED)} errors:\n  metric: unknown key")
    assert isinstance(caught.value, ConfigError)  # callers catching the one error type still catch it


def test_a_misspelt_setting_gets_one_suggestion_not_the_list_of_every_setting():
    with pytest.raises(ConfigError) as caught:
        load_config_text(GOOD + "settings:\n  quota.window.nums: 3\n")
    assert str(caught.value) == "settings.quota.window.nums: unknown key; did you mean quota.window.num?"
    with pytest.raises(ConfigError) as caught:
        load_config_text(GOOD + "settings:\n  no.such.setting: 3\n")
    message = str(caught.value)
    assert message.startswith("settings.no.such.setting: unknown key")
    assert len(SETTINGS) > 40 and sum(name in message for name in SETTINGS) == 0, message
    assert "kafka-quota-proxy schema" in message


def test_one_error_is_reported_alone_as_before():
    with pytest.raises(ConfigError) as caught:
        load_config_text(GOOD + "settings:\n  max.connections: 0\n")
    assert not isinstance(caught.value, ConfigErrors)
    assert str(caught.value) == "settings.max.connections: must be between 1 and 2147483647, got 0"


def test_check_config_prints_every_error_and_exits_2(tmp_path):
    path = tmp_path / "proxy.yaml"
    path.write_text(MANY)
    done = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "check-config", "--config", str(path)], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr.startswith(f"kafka-quota-proxy: configuration error in {path}: {len(EXPECTED)} errors:\n")
    for expected in EXPECTED:
        assert f"\n  {expected}" in done.stderr, done.stderr


def test_a_missing_tls_file_is_named_with_its_key(tmp_path):
    """The ssl module's FileNotFoundError names no file: each file is looked for first, so the operator reads which."""
    missing = tmp_path / "ca.pem"
    with pytest.raises(ConfigError) as caught:
        load_config_text(GOOD.replace("upstream:\n", f"upstream:\n  tls: {{cafile: '{missing}'}}\n", 1))
    assert str(caught.value) == f"upstream.tls.cafile: file not found: {missing}"
