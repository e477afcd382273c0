"""``--command-config FILE``: Kafka client properties, as kafka-configs.sh reads them, into kafka-python's arguments.

The keys an admin needs to reach the proxy over TLS and SASL::

    security.protocol=SASL_SSL                      # PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL
    sasl.mechanism=SCRAM-SHA-512                    # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
        username="admin" password="secret";
    ssl.ca.location=/etc/kafka/ca.pem               # PEM files (librdkafka's names), or the Java client's stores:
    ssl.truststore.type=PKCS12                      # PEM or PKCS12 trust and key stores (proxy.cli.key_stores);
    ssl.truststore.location=/etc/kafka/trust.p12    # a JKS store is an error saying how to convert it

``sasl.username``/``sasl.password`` may stand in for ``sasl.jaas.config``; ``ssl.certificate.location``,
``ssl.key.location`` and ``ssl.key.password`` give a client certificate (mTLS); ``ssl.endpoint.identification.algorithm``
empty turns the host-name check off, as in Kafka; ``client.id`` names the client. Any other key is an error naming it:
a key silently ignored is a setting the admin thinks applies and does not. No error quotes a value back: the file
holds a password, and a typo in it (an unterminated quote) must not print the secret to a terminal or a CI log.
"""

from __future__ import annotations

import re
from difflib import get_close_matches

from proxy.cli.key_stores import STORE_KEYS, StoreError, read_bounded, store_context

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
LOGIN_MODULES = (
    "org.apache.kafka.common.security.plain.PlainLoginModule",
    "org.apache.kafka.common.security.scram.ScramLoginModule",
)
FILES = {"ssl.ca.location": "ssl_cafile", "ssl.certificate.location": "ssl_certfile", "ssl.key.location": "ssl_keyfile"}
KEYS = (
    "security.protocol",
    "sasl.mechanism",
    "sasl.jaas.config",
    "sasl.username",
    "sasl.password",
    *FILES,
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "client.id",
    *STORE_KEYS,
)
MAX_BYTES = 1 << 20


class CommandConfigError(ValueError):
    """A command-config file that cannot be used; the message names the key."""


def read_command_config(path: str) -> dict:
    """The kafka-python arguments a properties file gives (see the module's docstring)."""
    props = read_properties(path, "--command-config")
    try:
        return client_arguments(props)
    except CommandConfigError as exc:
        raise CommandConfigError(f"--command-config {path}: {exc}") from None


def read_properties(path: str, option: str) -> dict[str, str]:
    """A java.util.Properties file named by ``option`` (at most MAX_BYTES), as a dict."""
    try:
        data = read_bounded(path, option, MAX_BYTES)
    except StoreError as exc:
        raise CommandConfigError(str(exc)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")  # what java.util.Properties reads
    try:
        return parse_properties(text)
    except CommandConfigError as exc:
        raise CommandConfigError(f"{option} {path}: {exc}") from None


def parse_properties(text: str) -> dict[str, str]:
    """java.util.Properties' format: ``key=value``, ``key: value`` or ``key value``; ``#`` and ``!`` comments; a
    line ending in an odd number of backslashes continues on the next (its leading blanks dropped)."""
    out: dict[str, str] = {}
    logical, number = "", 0
    for line_number, raw in enumerate(text.splitlines(), 1):
        number = number or line_number
        line = raw.lstrip() if logical else raw.strip()
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            logical += line[:-1]
            continue
        logical += line
        key, value = _split(logical, number)
        logical, number = "", 0
        if key in out:
            raise CommandConfigError(f"{key}: given twice")
        out[key] = value
    if logical:
        key, value = _split(logical, number)
        out[key] = value
    return out


def _split(line: str, number: int) -> tuple[str, str]:
    match = re.match(r"((?:[^\\=:\s]|\\.)+)\s*[=:\s]?\s*(.*)$", line, re.S)
    if match is None:  # the line is not quoted: it may be the value of a password
        raise CommandConfigError(f"line {number}: no key before its '{line[0]}'")
    return _unescape(match.group(1)), _unescape(match.group(2))


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(m.group(1), m.group(1)), text)


def client_arguments(props: dict[str, str]) -> dict:
    unknown = [k for k in props if k not in KEYS]
    if unknown:
        close = get_close_matches(unknown[0], KEYS, n=1, cutoff=0.8)
        hint = f"; did you mean {close[0]}?" if close else f" (supported: {', '.join(KEYS)})"
        raise CommandConfigError(f"{unknown[0]}: not a supported key{hint}")
    args: dict = {}
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise CommandConfigError(f"security.protocol: expected one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    args["security_protocol"] = protocol
    if "client.id" in props:
        args["client_id"] = props["client.id"]
    for key, name in FILES.items():
        if key in props:
            args[name] = props[key]
    if "ssl.key.password" in props:
        args["ssl_password"] = props["ssl.key.password"]
    if "ssl.endpoint.identification.algorithm" in props:
        algorithm = props["ssl.endpoint.identification.algorithm"].strip().lower()
        if algorithm not in ("", "https"):
            raise CommandConfigError(
                f"ssl.endpoint.identification.algorithm: expected https or empty, got {algorithm!r}"
            )
        args["ssl_check_hostname"] = algorithm == "https"
    stores = [k for k in props if k in STORE_KEYS]
    if stores:  # the Java client's trust and key stores: one SSLContext, which kafka-python then uses as it is
        both = [k for k in FILES if k in props]
        if both:
            raise CommandConfigError(
                f"{both[0]}: give PEM files (ssl.*.location) or Java stores ({stores[0]}), not both"
            )
        try:
            args["ssl_context"] = store_context(props, args.pop("ssl_check_hostname", True))
        except StoreError as exc:
            raise CommandConfigError(str(exc)) from None
        args.pop("ssl_password", None)
    sasl_keys = [k for k in props if k.startswith("sasl.")]
    if not protocol.startswith("SASL_"):
        if sasl_keys:
            raise CommandConfigError(
                f"{sasl_keys[0]}: only with security.protocol SASL_PLAINTEXT or SASL_SSL (got {protocol})"
            )
        return args
    mechanism = props.get("sasl.mechanism", "").strip().upper()
    if mechanism not in MECHANISMS:
        raise CommandConfigError(
            f"sasl.mechanism: expected one of {', '.join(MECHANISMS)} with {protocol}, got {mechanism or 'nothing'!r}"
        )
    username, password = props.get("sasl.username"), props.get("sasl.password")
    if "sasl.jaas.config" in props:
        if username is not None or password is not None:
            raise CommandConfigError("sasl.jaas.config: give it or sasl.username/sasl.password, not both")
        username, password = jaas_credentials(props["sasl.jaas.config"])
    if not username or password is None:
        raise CommandConfigError(
            f"sasl.jaas.config (or sasl.username and sasl.password): a username and password are needed for {mechanism}"
        )
    args.update(sasl_mechanism=mechanism, sasl_plain_username=username, sasl_plain_password=password)
    return args


_OPTION = re.compile(r'\s*([A-Za-z_][\w.-]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s";]+)')
_OPEN_QUOTE = re.compile(r'\s*([A-Za-z_][\w.-]*)\s*=\s*"')
NAMED_OPTIONS = ("username", "password", "tokenauth")  # option names that are safe to print; others may be text


def jaas_credentials(text: str) -> tuple[str, str]:
    """(username, password) from ``<LoginModule> required username="u" password="p";`` as Kafka writes it."""
    match = re.match(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b(.*)$", text, re.S)
    if match is None:
        raise CommandConfigError('sasl.jaas.config: expected \'<LoginModule> required username="..." password="...";\'')
    module, rest = match.group(1), match.group(3).strip()
    if module not in LOGIN_MODULES:
        raise CommandConfigError(
            f"sasl.jaas.config: login module {module} is not supported (supported: {', '.join(LOGIN_MODULES)})"
        )
    if not rest.endswith(";"):
        raise CommandConfigError("sasl.jaas.config: must end with ';'")
    rest = rest[:-1]
    options: dict[str, str] = {}
    position = 0
    while rest[position:].strip():
        option = _OPTION.match(rest, position)
        if option is None:
            raise CommandConfigError(f"sasl.jaas.config: {_unreadable(rest, position, list(options))}")
        value = option.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        options[option.group(1)] = value
        position = option.end()
    if "username" not in options or "password" not in options:
        raise CommandConfigError('sasl.jaas.config: needs username="..." and password="..."')
    return options["username"], options["password"]


def _unreadable(rest: str, position: int, read: list[str]) -> str:
    """Why the options cannot be read from ``position``, naming options but never quoting a value."""
    opening = _OPEN_QUOTE.match(rest, position)
    if opening is not None:
        name = opening.group(1)
        option = name if name in NAMED_OPTIONS else f"option {len(read) + 1}"
        return f"the value of {option} has no closing '\"' (an unterminated quote)"
    after = f"after {read[-1]}=" if read and read[-1] in NAMED_OPTIONS else f"at option {len(read) + 1}"
    return f'cannot read the options {after}: expected name=value or name="value" (an unterminated or stray quote?)'
