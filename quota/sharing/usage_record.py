"""One sidecar's usage record of bounded size (issue 26): what a sync publishes when the entities active since the
last one would not all fit in a Kafka record. Pure.

A record is the :mod:`quota.sharing.usage_encoding` encoding of byte counts rounded to two significant digits (what rounding
takes off is sent at the next sync), zlib-compressed, at most ``max_bytes`` long
(``quota.cluster.record.max.bytes``, below Kafka's default ``max.message.bytes`` of 1 MiB). When the whole delta
would be longer, the entries :class:`~quota.sharing.usage_gathered.Gathered` ranks first are sent (new producer ids and
mutation tokens, then byte rates by their usage as a share of their quota) and the rest go back into the tap for the
next sync (:meth:`~quota.sharing.usage_gathered.Gathered.leftover`): their usage reaches the peers late, never not at all, and as
a carried entry's usage grows with each sync it waits, it ranks higher in the next. The publisher counts and logs
the entries carried.

How many entries fit is guessed from the bytes per entry of the last record; a guess that turns out too long is
shrunk in proportion and encoded again, so a sync usually encodes once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from quota.sharing.usage_delta import UsageDelta
from quota.sharing.usage_encoding import encode
from quota.sharing.usage_gathered import Gathered, Leftover, LeftoverRow

FILL = 0.9
"""A guessed number of entries aims at this share of ``max_bytes`` (the compressed size per entry varies)."""


@dataclass(frozen=True, slots=True)
class Fitted:
    data: bytes  # the record's value
    delta: UsageDelta  # what it carries
    sent: int  # the ranked entries in it
    entities: int  # the ranked entries gathered
    encodings: int  # how many times it was encoded to fit
    leftover: Leftover  # for the next sync's fit: what did not fit, and what rounding took off what did

    @property
    def carried(self) -> int:
        return self.entities - self.sent

    @property
    def bytes_per_entry(self) -> float | None:
        """What the next guess starts from (None: nothing was sent, no measure)."""
        return len(self.data) / self.sent if self.sent else None


def fit(
    gathered: Gathered,
    max_bytes: int,
    bytes_per_entry: float | None = None,
    leftover: Iterable[LeftoverRow] = (),
    numbered: tuple[str, int] = ("", 0),
) -> Fitted:
    """The longest ranked prefix of ``gathered`` (with the last sync's ``leftover`` added) whose compressed
    encoding is at most ``max_bytes``, found from ``bytes_per_entry`` (the last record's; None: try everything
    first); ``numbered``: the record's ``(incarnation, seq)`` (:mod:`quota.sharing.usage_delta`)."""
    gathered.absorb(leftover)
    total = gathered.entities
    n = total
    if bytes_per_entry and total * bytes_per_entry > max_bytes:
        n = min(total, int(max_bytes * FILL / bytes_per_entry))
    encodings = 0
    while True:
        delta = gathered.top(n, coarse=True)
        if numbered[1]:
            delta = replace(delta, incarnation=numbered[0], seq=numbered[1])
        data = encode(delta, compress=True)
        encodings += 1
        if len(data) <= max_bytes or n == 0:
            return Fitted(data, delta, n, total, encodings, gathered.leftover(n))
        n = max(0, min(n - 1, int(n * max_bytes * FILL / len(data))))
