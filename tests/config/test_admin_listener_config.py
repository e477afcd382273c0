"""``listeners[].admin``: the admin listener's configuration (strict, at most one, never the only one, never in
cluster mode's form), and the warning ``check-config`` and start-up give when it binds anything but loopback."""

import pytest

from config.admin_listener import admin_listener_warnings
from config.errors import ConfigError
from config.loader import load_config_text
from config.own_clients import own_client_warnings
from proxy.cli.main import main

BASE = """
upstream:
  bootstrap_servers: ["127.0.0.1:9092"]
listeners:
  - {{name: CLIENT, bind: "0.0.0.0:19092"}}
  - {{name: ADMIN, bind: "{bind}", admin: true{extra}}}
"""


def load(bind: str = "127.0.0.1:19190", extra: str = ""):
    return load_config_text(BASE.format(bind=bind, extra=extra))


def test_the_admin_listener_is_flagged_and_not_a_sidecar_listener():
    client, admin = load().listeners
    assert (client.admin, client.sidecar) == (False, True)
    assert (admin.admin, admin.sidecar, admin.cluster_mode) == (True, False, False)
    assert admin.advertised_host == "127.0.0.1"  # what its clients are given for every broker


@pytest.mark.parametrize(
    "extra, path, says",
    [
        (", internal: true", r"listeners\[1\].admin", "cannot also be the internal"),
        (", broker_port_base: 19200", r"listeners\[1\].broker_port_base", "not on the admin listener"),
    ],
)
def test_an_admin_listener_is_neither_internal_nor_in_cluster_mode(extra, path, says):
    with pytest.raises(ConfigError, match=rf"{path}: .*{says}"):
        load(extra=extra)


def test_a_wildcard_bind_needs_the_host_its_clients_are_given():
    with pytest.raises(ConfigError, match=r"listeners\[1\].advertised_host: required on an admin listener"):
        load("0.0.0.0:19190")
    assert load("0.0.0.0:19190", ", advertised_host: ops.internal").listeners[1].advertised_host == "ops.internal"


def test_a_flag_that_is_not_a_boolean_is_refused_with_its_path():
    with pytest.raises(ConfigError, match=r"listeners\[1\].admin: expected true or false, got 'yes'"):
        load_config_text(BASE.format(bind="127.0.0.1:1", extra="").replace("admin: true", "admin: 'yes'"))


def test_one_admin_listener_at_most_and_never_alone():
    two = BASE.format(bind="127.0.0.1:19190", extra="") + '  - {name: ADMIN2, bind: "127.0.0.1:19191", admin: true}\n'
    with pytest.raises(ConfigError, match=r"listeners\[2\].admin: only one listener can be admin"):
        load_config_text(two)
    alone = 'upstream: {bootstrap_servers: ["b:1"]}\nlisteners: [{name: A, bind: "127.0.0.1:1", admin: true}]\n'
    with pytest.raises(ConfigError, match=r"listeners\[0\].admin: the admin listener cannot be the only one"):
        load_config_text(alone)


@pytest.mark.parametrize("bind", ["127.0.0.1:19190", "127.0.0.2:19190", "[::1]:19190", "localhost:19190"])
def test_loopback_binds_are_not_warned_of(bind):
    assert admin_listener_warnings(load(bind)) == []


@pytest.mark.parametrize("bind", ["10.0.0.5:19190", "ops-host:19190"])
def test_any_other_bind_is_warned_of_loudly(bind):
    (warning,) = admin_listener_warnings(load(bind))
    assert f"binds {bind}, not a loopback address" in warning and "is an admin whatever its principal" in warning


def test_check_config_prints_the_warning(tmp_path, capsys):
    path = tmp_path / "proxy.yaml"
    path.write_text(BASE.format(bind="0.0.0.0:19190", extra=", advertised_host: ops"))
    assert main(["check-config", "--config", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "valid" in out and "is the admin listener and binds 0.0.0.0:19190" in err


def test_an_admin_listener_beside_cluster_mode_is_no_sidecar_to_warn_of():
    text = """
upstream: {bootstrap_servers: ["b:1"]}
dynamic_config: {}
listeners:
  - {name: CLIENT, bind: "127.0.0.1:19092", broker_port_base: 19100}
  - {name: ADMIN, bind: "127.0.0.1:19190", admin: true}
"""
    assert own_client_warnings(load_config_text(text)) == []
    (warning,) = own_client_warnings(load_config_text(text.replace(", admin: true", "")))  # a sidecar listener
    assert "upstream.own_clients is not set" in warning


def test_the_start_up_line_names_the_admin_listener():
    from proxy.ops.about import config_summary

    assert "ADMIN 127.0.0.1:19190 (admin: its connections are admins, every broker as 127.0.0.1)" in config_summary(
        load()
    )
