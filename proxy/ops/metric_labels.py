"""Client-chosen names (client ids, users, volume names) as metric labels: bounded in length, so a client cannot
make a scrape, or Prometheus's index, as large as it likes."""

from __future__ import annotations

import hashlib

from quota.primitives.entity import QuotaTags
from quota.primitives.quota_groups import GROUP_MARK, group_of_tags

GROUP_LABEL = "<quota-group:"  # how a quota group's series starts its user label
MAX_LABEL = 128  # characters of a client-chosen label value (client id, user) in /metrics


def label(value: str) -> str:
    """A client-chosen name as a metric label: at most MAX_LABEL characters; a longer one is cut and made unique
    with a short hash of the whole (``<first 110 characters>...#<10 hex digits>``), as is a name that looks like a
    quota group's label (:func:`tag_labels`), so it never shares a series with the group nor reads as one."""
    if len(value) <= MAX_LABEL and not value.startswith((GROUP_LABEL, GROUP_MARK)):
        return value
    return f"{value[:110]}...#{hashlib.sha256(value.encode('utf-8', 'surrogateescape')).hexdigest()[:10]}"


def tag_labels(tags: QuotaTags) -> tuple[str, str]:
    """A quota sensor's tags as its ``user`` and ``client_id`` labels; a quota group's as ``<quota-group:NAME>`` and
    "": one series per group, whatever its members."""
    group = group_of_tags(tags)
    if group is not None:
        return f"{GROUP_LABEL}{group}>", ""
    return label(tags.user), label(tags.client_id)
