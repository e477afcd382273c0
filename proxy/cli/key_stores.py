"""The Java client's trust and key stores, as an operator's ``admin.properties`` for kafka-configs gives them, turned
into one ``ssl.SSLContext`` for kafka-python::

    ssl.truststore.type=PEM                  # or PKCS12 (JKS's default type reads PKCS12 files too, as Java does)
    ssl.truststore.location=/etc/kafka/ca.pem
    ssl.truststore.password=...              # PKCS12
    ssl.keystore.type=PKCS12                 # or PEM: the private key and its certificate chain in one file
    ssl.keystore.location=/etc/kafka/admin.p12
    ssl.keystore.password=...                # PKCS12
    ssl.key.password=...                     # an encrypted PEM key (PKCS12: when it differs from the store's)

``ssl.truststore.certificates``, ``ssl.keystore.key`` and ``ssl.keystore.certificate.chain`` give the same PEM text
inline (type PEM), as Kafka takes them. PKCS12 is read with ``cryptography``'s PKCS#12 loader. A JKS store (magic
``FEEDFEED``) cannot be read here: the error names the key and says how to convert it (``keytool -importkeystore``).
A key read from a PKCS12 store reaches ``ssl`` (which loads keys from files only) through a private temporary file
holding it encrypted with a one-time password, deleted at once; no error quotes a password or a file's content.
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile

TRUST_KEYS = (
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
)
KEY_KEYS = (
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.keystore.password",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
)
STORE_KEYS = (*TRUST_KEYS, *KEY_KEYS)
TYPES = ("PEM", "PKCS12", "JKS")
JKS_MAGIC = b"\xfe\xed\xfe\xed"
MAX_STORE_BYTES = 1 << 20
CONVERT = (
    "JKS key stores cannot be read here: convert it with keytool -importkeystore -srckeystore FILE "
    "-destkeystore FILE.p12 -deststoretype PKCS12 and set {type}=PKCS12, or give PEM files"
)


class StoreError(ValueError):
    """A store that cannot be used; the message names the key."""


def store_context(props: dict[str, str], check_hostname: bool) -> ssl.SSLContext:
    """The context the stores in ``props`` make: their CAs trusted (the system's when no trust store is given, as
    Java's default trust store), their key and chain presented, the host name checked when ``check_hostname``."""
    context = ssl.create_default_context(cadata=_trusted_pem(props))  # None: the system's CAs
    context.check_hostname = check_hostname
    _load_key(context, props)
    return context


def _type(props: dict, key: str) -> str:
    kind = props.get(key, "JKS").strip().upper()  # Java's default store type
    if kind not in TYPES:
        raise StoreError(f"{key}: expected one of {', '.join(TYPES)}, got {kind!r}")
    return kind


def read_bounded(path: str, label: str, limit: int = MAX_STORE_BYTES) -> bytes:
    """At most ``limit`` bytes of the file ``label`` (its key or option) names, or a StoreError saying why not."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise StoreError(f"{label}: cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise StoreError(f"{label}: {path} is larger than {limit} bytes")
    return data


def _read(props: dict, key: str) -> bytes:
    return read_bounded(props[key], key)


def _kind_of(data: bytes, declared: str, key: str, type_key: str) -> str:
    """What the file is, against what ``type_key`` says (Java's JKS type reads PKCS12 files too)."""
    if data.startswith(JKS_MAGIC):
        raise StoreError(f"{key}: {CONVERT.format(type=type_key)}")
    if data.lstrip().startswith(b"-----BEGIN"):
        if declared != "PEM":
            raise StoreError(f"{key}: the file is PEM text: set {type_key}=PEM")
        return "PEM"
    if declared == "PEM":
        raise StoreError(f"{key}: {type_key} is PEM but the file is not PEM text")
    return "PKCS12"


def _pkcs12(data: bytes, password: str | None, key: str, password_key: str):
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        return pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError:
        raise StoreError(
            f"{key}: cannot open the PKCS12 store (a wrong or missing {password_key}, or not a PKCS12 file)"
        ) from None


def _trusted_pem(props: dict) -> str | None:
    """The trust store's certificates as PEM text, or None when no trust store is given."""
    from cryptography.hazmat.primitives.serialization import Encoding

    if "ssl.truststore.certificates" in props:
        if "ssl.truststore.location" in props:
            raise StoreError("ssl.truststore.certificates: give it or ssl.truststore.location, not both")
        if _type(props, "ssl.truststore.type") != "PEM":
            raise StoreError("ssl.truststore.certificates: only with ssl.truststore.type=PEM")
        return props["ssl.truststore.certificates"]
    if "ssl.truststore.location" not in props:
        for key in ("ssl.truststore.type", "ssl.truststore.password"):
            if key in props:
                raise StoreError(f"{key}: given without ssl.truststore.location")
        return None
    data = _read(props, "ssl.truststore.location")
    kind = _kind_of(data, _type(props, "ssl.truststore.type"), "ssl.truststore.location", "ssl.truststore.type")
    if kind == "PEM":
        return data.decode("ascii", "replace")
    store = _pkcs12(data, props.get("ssl.truststore.password"), "ssl.truststore.location", "ssl.truststore.password")
    certificates = [c.certificate for c in store.additional_certs]
    if store.cert is not None:
        certificates.insert(0, store.cert.certificate)
    if not certificates:
        raise StoreError("ssl.truststore.location: the PKCS12 store holds no certificate")
    return "".join(c.public_bytes(Encoding.PEM).decode("ascii") for c in certificates)


def _load_key(context: ssl.SSLContext, props: dict) -> None:
    inline = [k for k in ("ssl.keystore.key", "ssl.keystore.certificate.chain") if k in props]
    if inline:
        if "ssl.keystore.location" in props:
            raise StoreError(f"{inline[0]}: give it or ssl.keystore.location, not both")
        if len(inline) < 2:
            missing = "ssl.keystore.certificate.chain" if inline == ["ssl.keystore.key"] else "ssl.keystore.key"
            raise StoreError(f"{inline[0]}: needs {missing} too")
        if _type(props, "ssl.keystore.type") != "PEM":
            raise StoreError(f"{inline[0]}: only with ssl.keystore.type=PEM")
        text = props["ssl.keystore.key"] + "\n" + props["ssl.keystore.certificate.chain"]
        _with_file(context, text.encode(), props.get("ssl.key.password"), "ssl.keystore.key")
        return
    if "ssl.keystore.location" not in props:
        for key in ("ssl.keystore.type", "ssl.keystore.password"):
            if key in props:
                raise StoreError(f"{key}: given without ssl.keystore.location")
        return
    data = _read(props, "ssl.keystore.location")
    kind = _kind_of(data, _type(props, "ssl.keystore.type"), "ssl.keystore.location", "ssl.keystore.type")
    if kind == "PEM":
        _with_file(context, data, props.get("ssl.key.password"), "ssl.keystore.location")
        return
    password = props.get("ssl.keystore.password") or props.get("ssl.key.password")
    store = _pkcs12(data, password, "ssl.keystore.location", "ssl.keystore.password")
    if store.key is None or store.cert is None:
        raise StoreError("ssl.keystore.location: the PKCS12 store holds no private key with its certificate")
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, Encoding, PrivateFormat

    once = secrets.token_urlsafe(24)
    pem = store.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(once.encode()))
    chain = [store.cert.certificate, *(c.certificate for c in store.additional_certs)]
    pem += b"".join(c.public_bytes(Encoding.PEM) for c in chain)
    _with_file(context, pem, once, "ssl.keystore.location")


def _with_file(context: ssl.SSLContext, pem: bytes, password: str | None, key: str) -> None:
    """``context.load_cert_chain`` of PEM text (a key and its chain): through a private file, deleted at once."""
    descriptor, path = tempfile.mkstemp(prefix="kqp-key-", suffix=".pem")  # mode 0600
    try:
        with os.fdopen(descriptor, "wb") as f:
            f.write(pem)
        # never OpenSSL's own prompt on the terminal: an encrypted key without its password is an error
        context.load_cert_chain(path, password=password or (lambda: b""))
    except ssl.SSLError as exc:
        raise StoreError(
            f"{key}: cannot load the private key and its certificate chain "
            f"({exc.reason or 'a wrong or missing ssl.key.password?'})"
        ) from None
    finally:
        os.unlink(path)
