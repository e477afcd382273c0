"""TLS sections: ``listeners[].tls`` (TLS termination, mTLS principals) and ``upstream.tls`` (TLS to the brokers).

```yaml
listeners:
  - name: SSL
    bind: "0.0.0.0:9093"
    tls:
      certfile: server.pem
      keyfile: server.key
      cafile: ca.pem                    # to verify client certificates
      client_auth: required             # none | requested | required
      principal_mapping_rules: "RULE:^CN=(.*?),OU=.*$/$1/,DEFAULT"   # Kafka's ssl.principal.mapping.rules
upstream:
  bootstrap_servers: ["broker:9093"]
  tls: {cafile: ca.pem}                 # verify the brokers (on by default); certfile/keyfile for mTLS to them
```
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from typing import Any

from config.errors import ConfigError, mapping_with
from config.principal_rules import MappingError, parse_rules  # parsed here so a bad rule fails at load

CLIENT_AUTH = ("none", "requested", "required")
LISTENER_TLS_KEYS = ("certfile", "keyfile", "cafile", "client_auth", "principal_mapping_rules")
UPSTREAM_TLS_KEYS = ("cafile", "certfile", "keyfile", "verify", "check_hostname")


@dataclass(frozen=True, slots=True)
class ListenerTls:
    certfile: str
    keyfile: str | None = None
    cafile: str | None = None
    client_auth: str = "none"
    principal_mapping_rules: Any = None  # Kafka's rule string, or a list of rules; None is DEFAULT

    def context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.certfile, self.keyfile)
        if self.cafile:
            ctx.load_verify_locations(self.cafile)
        ctx.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}[
            self.client_auth
        ]
        return ctx


@dataclass(frozen=True, slots=True)
class UpstreamTls:
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    verify: bool = True
    check_hostname: bool = True

    def context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.cafile)
        if not self.verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            ctx.check_hostname = self.check_hostname
        if self.certfile:
            ctx.load_cert_chain(self.certfile, self.keyfile)
        return ctx


def _path(raw: Any, path: str) -> str:
    if not isinstance(raw, str) or not raw:
        raise ConfigError(path, f"expected a file path, got {raw!r}")
    return raw


def _try(path: str, build, files: dict[str, str | None]) -> None:
    """Build the context now, so a missing file or a bad key fails at load, naming the key (``files``: key -> the
    file it names; the ssl module's errors do not say which file is missing)."""
    for key, name in files.items():
        if name is not None and not os.path.isfile(name):
            raise ConfigError(f"{path}.{key}", f"file not found: {name}")
    try:
        build()
    except FileNotFoundError as exc:
        raise ConfigError(path, f"file not found: {exc.filename}") from None
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise ConfigError(path, f"cannot be used for TLS: {exc}") from None


def parse_listener_tls(raw: Any, path: str) -> ListenerTls | None:
    if raw is None:
        return None
    m = mapping_with(raw, path, LISTENER_TLS_KEYS, {"certfile"})
    client_auth = m.get("client_auth", "none")
    if client_auth not in CLIENT_AUTH:
        raise ConfigError(f"{path}.client_auth", f"expected one of {', '.join(CLIENT_AUTH)}, got {client_auth!r}")
    cafile = _path(m["cafile"], f"{path}.cafile") if "cafile" in m else None
    if client_auth != "none" and cafile is None:
        raise ConfigError(f"{path}.cafile", f"required to verify client certificates (client_auth: {client_auth})")
    rules = m.get("principal_mapping_rules")
    try:
        parse_rules(rules)
    except MappingError as exc:
        raise ConfigError(f"{path}.principal_mapping_rules", str(exc)) from None
    tls = ListenerTls(
        _path(m["certfile"], f"{path}.certfile"),
        _path(m["keyfile"], f"{path}.keyfile") if "keyfile" in m else None,
        cafile,
        client_auth,
        rules,
    )
    _try(path, tls.context, {"certfile": tls.certfile, "keyfile": tls.keyfile, "cafile": tls.cafile})
    return tls


def parse_upstream_tls(raw: Any, path: str) -> UpstreamTls | None:
    if raw is None:
        return None
    m = mapping_with(raw, path, UPSTREAM_TLS_KEYS)
    for flag in ("verify", "check_hostname"):
        if flag in m and not isinstance(m[flag], bool):
            raise ConfigError(f"{path}.{flag}", f"expected true or false, got {m[flag]!r}")
    cafile, certfile, keyfile = (
        _path(m[k], f"{path}.{k}") if k in m else None for k in ("cafile", "certfile", "keyfile")
    )
    tls = UpstreamTls(
        cafile,
        certfile,
        keyfile,
        verify=m.get("verify", True),
        check_hostname=m.get("check_hostname", True),
    )
    _try(path, tls.context, {"cafile": tls.cafile, "certfile": tls.certfile, "keyfile": tls.keyfile})
    return tls
