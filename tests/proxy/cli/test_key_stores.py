"""The Java client's trust and key stores in a ``--command-config`` file (PEM and PKCS12, the forms kafka-configs
reads), checked by a real TLS handshake with client authentication; what cannot be used is an error naming the key,
never quoting a password. (JKS, made by keytool, beside kafka-configs itself: tests/integration/kafka/
test_configs_forms.py.)"""

from __future__ import annotations

import ssl
import threading

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    NoEncryption,
    PrivateFormat,
    load_pem_private_key,
    pkcs12,
)

from proxy.cli.command_config import CommandConfigError, client_arguments
from tests.harness import tcp_pair
from tests.tls_certs import Authority

PASSWORD = "st0re-Secret"


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """A CA, the server's certificate, and the admin's key and certificate in every form a properties file names."""
    directory = tmp_path_factory.mktemp("stores")
    ca = Authority(directory)
    server, admin = ca.server(), ca.client("admin", CN="admin")
    ca_cert = x509.load_pem_x509_certificate(open(ca.pem.cert, "rb").read())
    admin_cert = x509.load_pem_x509_certificate(open(admin.cert, "rb").read())
    admin_key = load_pem_private_key(open(admin.key, "rb").read(), None)
    files = {
        "ca.pem": open(ca.pem.cert, "rb").read(),
        "trust.p12": pkcs12.serialize_key_and_certificates(
            None, None, None, [ca_cert], BestAvailableEncryption(PASSWORD.encode())
        ),
        "admin.p12": pkcs12.serialize_key_and_certificates(
            b"admin", admin_key, admin_cert, None, BestAvailableEncryption(PASSWORD.encode())
        ),
        "admin-keystore.pem": admin_key.private_bytes(
            Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(b"key-pass")
        )
        + admin_cert.public_bytes(Encoding.PEM),
    }
    paths = {}
    for name, data in files.items():
        (directory / name).write_bytes(data)
        paths[name] = str(directory / name)
    paths["server"] = server
    paths["ca"] = ca.pem.cert
    return paths


def handshake(context: ssl.SSLContext, stores) -> str | None:
    """A TLS handshake with a server presenting the test server certificate and asking for a client certificate;
    the client certificate's CN the server saw (None when none was presented)."""
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(stores["server"].cert, stores["server"].key)
    server_context.load_verify_locations(stores["ca"])
    server_context.verify_mode = ssl.CERT_OPTIONAL
    ours, theirs = tcp_pair()
    for sock in (ours, theirs):
        sock.setblocking(True)
        sock.settimeout(10)
    seen: dict = {}

    def serve():
        with server_context.wrap_socket(theirs, server_side=True) as tls:
            peer = tls.getpeercert()
            seen["cn"] = dict(x[0] for x in peer["subject"])["commonName"] if peer else None

    thread = threading.Thread(target=serve)
    thread.start()
    with context.wrap_socket(ours, server_hostname="127.0.0.1"):
        pass
    thread.join(10)
    return seen.get("cn")


def test_pem_stores_as_kafka_configs_reads_them(stores):
    args = client_arguments(
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": stores["ca.pem"],
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": stores["admin-keystore.pem"],
            "ssl.key.password": "key-pass",
        }
    )
    assert set(args) == {"security_protocol", "ssl_context"}
    assert args["ssl_context"].check_hostname  # ssl.endpoint.identification.algorithm defaults to https
    assert handshake(args["ssl_context"], stores) == "admin"


def test_pkcs12_stores_also_under_javas_default_type(stores):
    for declared in ({"ssl.truststore.type": "PKCS12", "ssl.keystore.type": "PKCS12"}, {}):  # default: JKS, which
        args = client_arguments(
            {
                "security.protocol": "SSL",
                **declared,  # reads PKCS12 files too
                "ssl.truststore.location": stores["trust.p12"],
                "ssl.truststore.password": PASSWORD,
                "ssl.keystore.location": stores["admin.p12"],
                "ssl.keystore.password": PASSWORD,
                "ssl.endpoint.identification.algorithm": "",
            }
        )
        assert not args["ssl_context"].check_hostname
        assert handshake(args["ssl_context"], stores) == "admin"


def test_inline_pem_certificates_and_key(stores):
    key_and_chain = open(stores["admin-keystore.pem"]).read()
    key, chain = key_and_chain.split("-----END ENCRYPTED PRIVATE KEY-----\n")
    args = client_arguments(
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.keystore.type": "PEM",
            "ssl.truststore.certificates": open(stores["ca.pem"]).read(),
            "ssl.keystore.key": key + "-----END ENCRYPTED PRIVATE KEY-----\n",
            "ssl.keystore.certificate.chain": chain,
            "ssl.key.password": "key-pass",
        }
    )
    assert handshake(args["ssl_context"], stores) == "admin"


def test_a_trust_store_alone_verifies_the_server_and_presents_no_certificate(stores):
    args = client_arguments(
        {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": stores["ca.pem"]}
    )
    assert handshake(args["ssl_context"], stores) is None


@pytest.mark.parametrize(
    "props,reason",
    [
        (
            {"ssl.truststore.location": "ca.pem"},
            "ssl.truststore.location: the file is PEM text: set ssl.truststore.type=PEM",
        ),
        (
            {"ssl.truststore.type": "PEM", "ssl.truststore.location": "trust.p12"},
            "ssl.truststore.location: ssl.truststore.type is PEM but the file is not PEM text",
        ),
        (
            {"ssl.truststore.location": "trust.p12", "ssl.truststore.password": "wrong-" + PASSWORD},
            "ssl.truststore.location: cannot open the PKCS12 store (a wrong or missing ssl.truststore.password",
        ),
        (
            {
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": "ca.pem",
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "admin-keystore.pem",
            },
            "ssl.keystore.location: cannot load the private key",
        ),
        ({"ssl.truststore.type": "BKS", "ssl.truststore.location": "ca.pem"}, "ssl.truststore.type: expected one of"),
        ({"ssl.truststore.password": PASSWORD}, "ssl.truststore.password: given without ssl.truststore.location"),
        (
            {"ssl.ca.location": "ca.pem", "ssl.truststore.type": "PEM", "ssl.truststore.location": "ca.pem"},
            "ssl.ca.location: give PEM files (ssl.*.location) or Java stores",
        ),
        (
            {"ssl.keystore.key": "x", "ssl.keystore.type": "PEM"},
            "ssl.keystore.key: needs ssl.keystore.certificate.chain",
        ),
        (
            {"ssl.trustStore.location": "ca.pem"},
            "ssl.trustStore.location: not a supported key; did you mean ssl.truststore.location?",
        ),
    ],
)
def test_what_cannot_be_used_is_named_by_its_key_never_quoting_a_password(stores, props, reason):
    props = {"security.protocol": "SSL", **{k: stores.get(v, v) for k, v in props.items()}}
    with pytest.raises(CommandConfigError) as caught:
        client_arguments(props)
    assert reason in str(caught.value)
    assert PASSWORD not in str(caught.value) and "key-pass" not in str(caught.value)


def test_an_unencrypted_pem_key_needs_no_password(stores, tmp_path):
    key = load_pem_private_key(open(stores["admin-keystore.pem"], "rb").read(), b"key-pass")
    plain = tmp_path / "plain.pem"
    plain.write_bytes(
        key.private_bytes(Encoding.PEM, PrivateFormat.TraditionalOpenSSL, NoEncryption())
        + open(stores["admin-keystore.pem"], "rb").read().split(b"-----END ENCRYPTED PRIVATE KEY-----\n")[1]
    )
    args = client_arguments(
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": stores["ca.pem"],
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(plain),
        }
    )
    assert handshake(args["ssl_context"], stores) == "admin"
