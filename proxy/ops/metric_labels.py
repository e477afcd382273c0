"""Client-chosen names (client ids, users, volume names) as metric labels: bounded in length, so a client cannot
make a scrape, or Prometheus's index, as large as it likes."""

from __future__ import annotations

import hashlib

from quota.primitives.quota_groups import GROUP_MARK

GROUP_LABEL = "<quota-group:"  # how a quota group's series starts its user label
MAX_LABEL = 128  # characters of a client-chosen label value (client id, user) in /metrics


def label(value: str) -> str:
    """A client-chosen name as a metric label: at most MAX_LABEL characters; a longer one is cut and made unique
    with a short hash of the whole (``<first 110 characters>...#<10 hex digits>``). A quota group's tag (its sensor's
    user part) is its name as ``<quota-group:NAME>``: one series per group, whatever its members; a name that only
    looks like one gets the hash, so it never shares a series with the group."""
    if value[:1] == GROUP_MARK:
        return f"{GROUP_LABEL}{value[1:]}>"
    if len(value) <= MAX_LABEL and not value.startswith(GROUP_LABEL):
        return value
    return f"{value[:110]}...#{hashlib.sha256(value.encode('utf-8', 'surrogateescape')).hexdigest()[:10]}"
