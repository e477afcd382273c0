"""kafka-configs' own forms with our ``configs`` beside Kafka's ConfigCommand (4.4.0, from the broker's jars), the
same command lines and the same ``admin.properties`` files given to both, against a sidecar of a real Kafka broker
whose listener speaks TLS and maps the client certificate's CN to the principal (admin_principals: User:admin).

The forms: ``--user/--client`` combined, ``--user-defaults``, ``--ip-defaults``, ``--add-config-file``; the client
properties: PEM trust and key stores (``ssl.truststore.type=PEM``), PKCS12 stores (the trust store made by keytool,
as operators make theirs), and a JKS trust store, which kafka-configs reads and ours refuses naming the key and how
to convert it. Each tool alters what the other then describes and deletes: both reach the same proxy store and print
the same values (Kafka's tool for the entity ours set, ours for the one Kafka's set, from the same
properties file of quotas). Every entry is removed again, so kafka1's config topic is left as found."""

from __future__ import annotations

import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, load_pem_private_key, pkcs12

from proxy.cli.configs import main as configs
from tests.harness import start_proxy, wait_until
from tests.kafka_cluster import CONFIGS, unique_topic

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("kafka1"), pytest.mark.long_running(seconds=18)]

PASSWORD = "st0re-Secret"
KEYTOOL = ["keytool", "-J-XX:TieredStopAtLevel=1", "-J-Xshare:auto"]


def keytool_trust_store(ca_pem: str, path: str, store_type: str) -> None:
    subprocess.run(
        [
            *KEYTOOL,
            "-importcert",
            "-noprompt",
            "-alias",
            "ca",
            "-file",
            ca_pem,
            "-keystore",
            path,
            "-storetype",
            store_type,
            "-storepass",
            PASSWORD,
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )


def properties_files(tmp_path, authority) -> dict[str, str]:
    """admin.properties in three forms: PEM stores, PKCS12 stores, a JKS trust store (with a PEM key store)."""
    admin = authority.client("forms-admin", CN="admin")
    key_pem = tmp_path / "admin-keystore.pem"
    key_pem.write_text(open(admin.key).read() + open(admin.cert).read())
    key = load_pem_private_key(open(admin.key, "rb").read(), None)
    cert = x509.load_pem_x509_certificate(open(admin.cert, "rb").read())
    (tmp_path / "admin.p12").write_bytes(
        pkcs12.serialize_key_and_certificates(b"admin", key, cert, None, BestAvailableEncryption(PASSWORD.encode()))
    )
    with ThreadPoolExecutor(2) as pool:
        list(
            pool.map(
                lambda kind: keytool_trust_store(authority.pem.cert, str(tmp_path / f"trust.{kind.lower()}"), kind),
                ["PKCS12", "JKS"],
            )
        )
    files = {
        "pem": {
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": authority.pem.cert,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": key_pem,
        },
        "p12": {
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": tmp_path / "trust.pkcs12",
            "ssl.truststore.password": PASSWORD,
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": tmp_path / "admin.p12",
            "ssl.keystore.password": PASSWORD,
            "ssl.key.password": PASSWORD,
        },
        "jks": {
            "ssl.truststore.location": tmp_path / "trust.jks",
            "ssl.truststore.password": PASSWORD,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": key_pem,
        },
    }
    paths = {}
    for name, props in files.items():
        path = tmp_path / f"{name}.properties"
        path.write_text("security.protocol=SSL\n" + "".join(f"{k}={v}\n" for k, v in props.items()))
        paths[name] = str(path)
    return paths


def values(line: str) -> dict[str, float]:
    """``Quota configs for ... are k=v, k=v`` (either tool's wording) as {key: value}."""
    match = re.search(r" are (.*)$", line.strip())
    assert match, line
    return {k: float(v) for k, v in (pair.split("=") for pair in match.group(1).split(", "))}


def test_both_tools_take_the_same_forms_and_properties_and_see_each_others_changes(kafka1, kafka_tls, tmp_path, capsys):
    authority, server = kafka_tls
    props = properties_files(tmp_path, authority)
    quotas_file = tmp_path / "quotas.properties"
    quotas_file.write_text("# etl's quotas\nproducer_byte_rate=1048576\nconsumer_byte_rate=2097152\n")
    config = kafka1.sidecar_config(kafka1.nodes[0])
    config["listeners"][0]["tls"] = {
        "certfile": server.cert,
        "keyfile": server.key,
        "cafile": authority.pem.cert,
        "client_auth": "requested",
        "principal_mapping_rules": "RULE:^CN=(.*?)$/$1/,DEFAULT",
    }
    config["dynamic_config"] = {}
    config["admin_principals"] = ["User:admin"]
    u1, c1, u2, c2 = (unique_topic(f"forms-{name}") for name in ("u1", "c1", "u2", "c2"))
    proxy = start_proxy(config)
    via = proxy.bootstrap

    def java(*calls):
        with ThreadPoolExecutor(len(calls)) as pool:
            return list(
                pool.map(lambda args: kafka1.tool(CONFIGS, "--bootstrap-server", via, *args, check=False), calls)
            )

    def ours(*args) -> tuple[int, str, str]:
        capsys.readouterr()
        code = configs(["--bootstrap-server", via, *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    try:
        # the same forms, each tool on its own entities; Kafka's with the PKCS12 and PEM files, ours the other way
        done = java(
            [
                "--alter",
                "--user",
                u1,
                "--client",
                c1,
                "--add-config-file",
                str(quotas_file),
                "--command-config",
                props["p12"],
            ],
            [
                "--alter",
                "--user-defaults",
                "--add-config",
                "producer_byte_rate=1073741824",
                "--command-config",
                props["pem"],
            ],
        )
        for result in done:
            assert result.returncode == 0 and "Completed updating" in result.stdout, result.stdout + result.stderr
        code, out, err = ours(
            "--alter",
            "--user",
            u2,
            "--client",
            c2,
            "--add-config-file",
            str(quotas_file),
            "--command-config",
            props["pem"],
        )
        assert code == 0 and f"Completed updating config for client-id {c2}, user {u2}" in out, out + err
        code, out, err = ours(
            "--alter",
            "--ip-defaults",
            "--add-config",
            "connection_creation_rate=100000",
            "--command-config",
            props["p12"],
        )
        assert code == 0 and "connection_creation_rate: (unset) -> 100000" in out, out + err
        # a JKS trust store: Kafka's tool reads it (below); ours says which key and how to convert it
        code, out, err = ours("--describe", "--user-defaults", "--command-config", props["jks"])
        assert (
            code == 2
            and "ssl.truststore.location: JKS key stores cannot be read here: convert it with keytool -importkeystore"
            in err
        ), err
        assert PASSWORD not in err

        def ours_shown(*form) -> dict:
            code, out, err = ours("--describe", *form, "--command-config", props["pem"])
            assert code == 0, err
            return values(out) if out.strip() else {}

        etl = {"producer_byte_rate": 1048576, "consumer_byte_rate": 2097152}
        wait_until(
            lambda: (
                [
                    ours_shown("--user", u1, "--client", c1),
                    ours_shown("--user", u2, "--client", c2),
                    ours_shown("--user-defaults"),
                    ours_shown("--ip-defaults"),
                ]
                == [etl, etl, {"producer_byte_rate": 1073741824}, {"connection_creation_rate": 100000}]
            ),
            15,
            "every change in force, as ours describes it",
            interval=0.5,
        )
        # Kafka's tool describes what ours set (with the JKS trust store) and deletes what ours set; ours deletes what
        # Kafka's set
        shown, deleted = java(
            ["--describe", "--user", u2, "--client", c2, "--command-config", props["jks"]],
            [
                "--alter",
                "--ip-defaults",
                "--delete-config",
                "connection_creation_rate",
                "--command-config",
                props["pem"],
            ],
        )
        assert shown.returncode == 0, shown.stdout + shown.stderr
        (line,) = [line for line in shown.stdout.splitlines() if line.startswith("Quota configs for")]
        assert (
            line.startswith(f"Quota configs for user-principal '{u2}', client-id '{c2}' are ") and values(line) == etl
        ), line
        assert deleted.returncode == 0, deleted.stdout + deleted.stderr
        code, out, err = ours(
            "--alter", "--user-defaults", "--delete-config", "producer_byte_rate", "--command-config", props["p12"]
        )
        assert code == 0 and "producer_byte_rate: 1073741824 -> (unset)" in out, out + err
        wait_until(
            lambda: ours_shown("--ip-defaults") == {} and ours_shown("--user-defaults") == {},
            15,
            "both defaults deleted",
        )
    finally:
        for form, keys in [
            (["--user", u1, "--client", c1], "producer_byte_rate,consumer_byte_rate"),
            (["--user", u2, "--client", c2], "producer_byte_rate,consumer_byte_rate"),
            (["--user-defaults"], "producer_byte_rate"),
            (["--ip-defaults"], "connection_creation_rate"),
        ]:
            ours("--alter", *form, "--delete-config", keys, "--command-config", props["pem"])  # set or not
        proxy.stop()
