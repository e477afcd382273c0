"""Who changed the dynamic configuration, from where, and from what to what (issue 44).

Every change the proxy writes to its config topic (AlterClientQuotas, the ``configs`` command, which sends it, and
IncrementalAlterConfigs of the proxy-wide settings) is logged on the ``kafka_quota_proxy.audit`` logger with the
principal, the client's address, the API, the entity and its values before and after, and carries the same as a JSON
header (:data:`AUDIT_HEADER`) on its record, so the topic itself says who wrote each entry. Those lines are never
dropped by the proxy's per-template log bound (only admins can make them). A change read from the topic once the
proxy follows it live is logged too, with what its header says, or that it has none: it was written past the proxy,
straight to the topic (a broker ACL decides who can).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence

from config.dynamic import Record
from proxy.ground.logs import AUDIT_LOGGER

AUDIT_HEADER = "kafka-quota-proxy-audit"

log = logging.getLogger(AUDIT_LOGGER)
follow_log = logging.getLogger("kafka_quota_proxy.dynamic_config")

AuditedRecord = tuple[bytes, "bytes | None", list[tuple[str, bytes]]]


def values_of(entries: Mapping[bytes, tuple[dict, dict]], key: bytes) -> dict | None:
    """The values an entry has in force (None: no entry)."""
    found = entries.get(key)
    return None if found is None else dict(found[1])


def audited(
    entries: Mapping[bytes, tuple[dict, dict]], records: Sequence[Record], principal: str, address: str, via: str
) -> list[AuditedRecord]:
    """``records`` (key, value) about to be written by ``principal`` at ``address`` through the API ``via``: each
    logged, and given its audit header. ``entries``: those in force, for the values before."""
    out: list[AuditedRecord] = []
    before: dict[bytes, dict | None] = {}
    for key, value in records:
        old = before[key] if key in before else values_of(entries, key)
        new = None if value is None else json.loads(value)
        before[key] = new
        log.info("%s by %s from %s: %s: %s -> %s", via, principal, address, _key(key), _shown(old), _shown(new))
        header = json.dumps(
            {"principal": principal, "address": address, "via": via, "old": old, "new": new}, sort_keys=True
        ).encode()
        out.append((key, value, [(AUDIT_HEADER, header)]))
    return out


def read(topic: str, key: bytes | None, old: dict | None, new: dict | None, headers: Iterable | None) -> None:
    """A change read from the config topic while following it: logged with its writer as its header says."""
    written = None
    for name, value in headers or ():
        if name == AUDIT_HEADER:
            try:
                written = json.loads(value)
            except (ValueError, TypeError):
                written = None
    if isinstance(written, dict):
        who = (
            f"written by {written.get('principal')} from {written.get('address')} through the proxy "
            f"({written.get('via')})"
        )
    else:
        who = "no audit header: written straight to the topic, past the proxy"
    follow_log.info("config topic %s: %s: %s -> %s (%s)", topic, _key(key or b""), _shown(old), _shown(new), who)


def _key(key: bytes) -> str:
    return key.decode(errors="replace")


def _shown(values: dict | None) -> str:
    return "(none)" if values is None else json.dumps(values, sort_keys=True)
