"""Bytes of Produce requests held in the proxy for their new producer ids (KIP-936 ``hold``): bounded per connection
(``connections.max.held.request.bytes``) and in all (``max.held.request.bytes``). Pure: plain integers in and out.

A held request is read whole and kept until its producer id's token comes (at most
``producer.id.quota.max.hold.ms``), so without a bound the holds alone could take ``socket.request.max.bytes`` per
connection: 40 holds of 8 MB took a proxy from 40 to 355 MiB (issue 35). The bytes are reserved when the hold is
decided, at the request's header (its frame length is known there, before the body is read), and released when the
request goes to the broker or its connection's hold ends. A hold that would pass either bound is not made: the
producer-id quota refuses the request instead (retriable ``NOT_ENOUGH_REPLICAS``, nothing counted), so only the user
over its quota is affected, and nothing acknowledged is ever dropped.
"""

from __future__ import annotations

CONNECTION, PROXY = "connection", "proxy"  # which bound a refused hold would have passed
BOUNDS = (CONNECTION, PROXY)


class HeldBytes:
    """The bytes held now across one proxy process, and the bounds. Per-connection bytes are kept by the caller
    (one integer per connection) and passed in."""

    __slots__ = ("max_connection", "max_total", "total", "requests", "refused")

    def __init__(self, max_connection: int, max_total: int) -> None:
        if max_connection < 0 or max_total < 0:
            raise ValueError(f"held-byte bounds must be >= 0, got {max_connection} and {max_total}")
        self.max_connection = max_connection
        self.max_total = max_total
        self.total = 0  # bytes of the requests held now
        self.requests = 0  # and how many
        self.refused = dict.fromkeys(BOUNDS, 0)  # holds not made, by the bound they would have passed

    def full(self, connection_bytes: int, nbytes: int) -> str | None:
        """The bound a hold of ``nbytes`` more would pass on a connection holding ``connection_bytes`` already
        (:data:`CONNECTION` or :data:`PROXY`), or None when it fits."""
        if connection_bytes + nbytes > self.max_connection:
            return CONNECTION
        if self.total + nbytes > self.max_total:
            return PROXY
        return None

    def refuse(self, bound: str) -> None:
        self.refused[bound] += 1

    def hold(self, nbytes: int) -> None:
        self.total += nbytes
        self.requests += 1

    def release(self, nbytes: int) -> None:
        if nbytes > self.total or not self.requests:
            raise ValueError(f"released {nbytes} held bytes of {self.total}")
        self.total -= nbytes
        self.requests -= 1
