"""``upstream.own_clients``: where the proxy's own clients go (a broker listener no proxy is in front of), with the
upstream's TLS and SASL unless the section says otherwise; and the warning ``check-config`` and start-up give for a
sidecar layout whose own clients other sidecars will refuse (PLAINTEXT, several brokers, a writer of its topics)."""

import pytest

from config.errors import ConfigError
from config.loader import load_config_text
from config.own_clients import own_client_warnings
from proxy.cli.main import main
from tests.tls_certs import Authority

SIDECAR = """
upstream:
  bootstrap_servers: ["127.0.0.1:9092"]
{own}
listeners:
  - name: CLIENT
    bind: "0.0.0.0:19092"
volume_usage:
  publisher:
    broker_id: 1
    log_dirs: [/var/lib/kafka/data]
    soft_limit: {{type: MinFreePercentage, level: 20}}
    hard_limit: {{type: MinFreePercentage, level: 5}}
"""
OWN = '  own_clients:\n    bootstrap_servers: ["kafka-1:9095"]\n'
SASL = "  sasl: {mechanism: PLAIN, username: kqp, password: secret}\n"


def load(own: str = "", extra: str = ""):
    return load_config_text(SIDECAR.format(own=own.rstrip("\n")) + extra)


def test_not_set_the_own_clients_go_where_the_listeners_forward():
    upstream = load().upstream
    assert upstream.own_clients is None
    assert upstream.own_traffic.bootstrap_servers == upstream.bootstrap_servers


def test_set_the_own_clients_take_the_upstream_security_unless_told_otherwise(tmp_path):
    cfg = load(SASL + OWN)
    own = cfg.upstream.own_traffic
    assert [str(a) for a in own.bootstrap_servers] == ["kafka-1:9095"]
    assert own.sasl == cfg.upstream.sasl and own.sasl.username == "kqp"
    assert own.tls is None
    assert load(SASL + OWN + "    sasl: false\n").upstream.own_traffic.sasl is None  # a PLAINTEXT PROXIES listener
    other = load(SASL + OWN + "    sasl: {mechanism: SCRAM-SHA-512, username: proxies, password: p}\n")
    assert other.upstream.own_traffic.sasl.username == "proxies" and other.upstream.sasl.username == "kqp"
    ca = Authority(tmp_path).pem.cert
    tls = load(OWN + f"    tls: {{cafile: {ca}}}\n").upstream
    assert tls.own_traffic.tls.cafile == ca and tls.tls is None
    inherited = load(f"  tls: {{cafile: {ca}}}\n" + OWN).upstream
    assert inherited.own_traffic.tls == inherited.tls
    assert load(f"  tls: {{cafile: {ca}}}\n" + OWN + "    tls: false\n").upstream.own_traffic.tls is None


@pytest.mark.parametrize(
    "own,message",
    [
        ("  own_clients: {}\n", r"upstream.own_clients.bootstrap_servers: required key is missing"),
        ("  own_clients: [kafka-1:9095]\n", r"upstream.own_clients: expected a mapping, got list"),
        (
            "  own_clients: {bootstrap_servers: []}\n",
            r"upstream.own_clients.bootstrap_servers: expected a non-empty list",
        ),
        (
            "  own_clients: {bootstrap_servers: [kafka-1]}\n",
            r"upstream.own_clients.bootstrap_servers\[0\]: expected host:port, got 'kafka-1'",
        ),
        (
            OWN + "    bootstrap: [x:1]\n",
            r"upstream.own_clients.bootstrap: unknown key \(known keys: bootstrap_servers, "
            r"sasl, tls\)",
        ),
        (
            OWN + "    tls: true\n",
            r"upstream.own_clients.tls: expected a mapping \(as upstream.tls\) or false, got True",
        ),
        (OWN + "    sasl: {mechanism: GSSAPI, username: a, password: b}\n", r"upstream.own_clients.sasl.mechanism: "),
        (
            OWN + "    tls: {cafile: /no/such/ca.pem}\n",
            r"upstream.own_clients.tls.cafile: file not found: /no/such/ca.pem",
        ),
    ],
)
def test_a_bad_section_names_its_key(own, message):
    with pytest.raises(ConfigError, match=message):
        load(own)


def test_a_plaintext_sidecar_writing_the_proxys_topics_without_own_clients_is_warned_of():
    (warning,) = own_client_warnings(load())
    assert "upstream.own_clients is not set" in warning and "no principal (PLAINTEXT" in warning
    assert "the volume-usage topic __kafka_quota_proxy_volume_usage" in warning
    assert "the config topic __kafka_quota_proxy_configs" in warning
    assert "produce stops on every sidecar" in warning and "upstream.own_clients.bootstrap_servers" in warning
    assert "this cluster's 3 brokers" in own_client_warnings(load(), brokers=3)[0]
    assert own_client_warnings(load(), brokers=1) == []  # one broker: every partition is led by its own
    assert own_client_warnings(load(OWN)) == []
    opened = load_config_text(
        SIDECAR.format(own="").replace("  publisher:", "  missing_data_action: OPEN\n  publisher:")
    )
    assert "produce stops" not in own_client_warnings(opened)[0]  # missing data opens: refused, but no pause


def test_what_the_warning_is_about_decides_whether_it_is_given():
    dynamic_only = load_config_text(SIDECAR.format(own="").split("volume_usage:")[0])
    (warning,) = own_client_warnings(dynamic_only)
    assert "the config topic" in warning and "produce stops" not in warning  # no volume publisher: no pause
    nothing = load_config_text(SIDECAR.format(own="").split("volume_usage:")[0] + "dynamic_config: {enabled: false}\n")
    assert own_client_warnings(nothing) == []
    cluster_mode = load_config_text(
        SIDECAR.format(own="").replace(
            'bind: "0.0.0.0:19092"', 'bind: "0.0.0.0:19092"\n    broker_port_base: 19100\n    advertised_host: proxy'
        )
    )
    assert own_client_warnings(cluster_mode) == []  # in front of a listener advertising the brokers themselves


def test_a_login_the_sidecars_do_not_list_is_warned_of_and_one_they_list_is_not():
    (warning,) = own_client_warnings(load(SASL))
    assert "log in as User:kqp, which admin_principals does not list" in warning
    assert own_client_warnings(load(SASL, "admin_principals: [User:kqp]\n")) == []


def test_anonymous_admins_are_warned_of():
    (warning,) = own_client_warnings(load(OWN, "admin_principals: [User:ANONYMOUS]\n"))
    assert warning.startswith("admin_principals lists User:ANONYMOUS: every client without a login")


def test_check_config_prints_the_warning_and_still_exits_0(tmp_path, capsys):
    path = tmp_path / "proxy.yaml"
    path.write_text(SIDECAR.format(own=""))
    assert main(["check-config", "--config", str(path)]) == 0
    out = capsys.readouterr()
    assert out.out == f"{path}: valid\n"
    assert out.err.startswith(f"kafka-quota-proxy: warning: {path}: upstream.own_clients is not set")
    path.write_text(SIDECAR.format(own=OWN.rstrip("\n")))
    assert main(["check-config", "--config", str(path)]) == 0
    assert capsys.readouterr().err == ""


def test_no_shipped_configuration_is_warned_of():
    """Every proxy configuration the repository ships passes check-config without a warning."""
    from tests.shipped_configs import COMPOSE_PROXIES, rendered

    shipped = [load_config_text(path.read_text(), {}) for path in COMPOSE_PROXIES]
    shipped += [rendered("sidecar", pod) for pod in range(3)] + [rendered("cluster")]
    assert [own_client_warnings(cfg) for cfg in shipped] == [[]] * len(shipped)
