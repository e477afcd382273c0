"""Whether a Fetch comes from a follower broker, read before the frame's first byte moves (where it can be).

Fetch v0-14 begin their body with ``ReplicaId`` int32: the id of the follower broker replicating (>= 0), or -1 from
a consumer (Kafka's ``FetchRequest.isFromFollower`` is ``replicaId >= 0``; the other negative ids are consumers as
far as quotas go). From v15 (KIP-903) that field is gone: the id is in ``ReplicaState`` (tagged field 1:
``ReplicaId`` int32, ``ReplicaEpoch`` int64, absent meaning -1), and top-level tagged fields come after every other
field, so it can only be read from the whole body; at the header a v15+ Fetch reads as -1 and its handler decides
on the decoded body.

Bytes in, values out, no I/O; a prefix that is not in yet raises :class:`~proxy.codec.header.Incomplete`.
"""

from __future__ import annotations

import dataclasses
import struct

from proxy.codec.apis import FETCH_REPLICA_STATE_SINCE
from proxy.codec.header import Incomplete, RequestHeader
from proxy.codec.primitives import Bytes

_INT32 = struct.Struct(">i")


def fetch_replica_id(buf: Bytes, header: RequestHeader) -> int:
    """The ``ReplicaId`` of the Fetch request whose header is ``header`` and which starts at ``buf[0]``; -1 from v15
    on (not at a fixed place) and for a frame that ends before the field (not a Fetch any broker accepts)."""
    if header.api_version >= FETCH_REPLICA_STATE_SINCE:
        return -1
    pos = header.header_length
    if pos + 4 > header.size + 4:
        return -1
    if pos + 4 > len(buf):
        raise Incomplete
    replica_id: int = _INT32.unpack_from(buf, pos)[0]
    return replica_id


def with_fetch_replica_id(buf: Bytes, header: RequestHeader) -> RequestHeader:
    """``header`` with its ``replica_id`` read (:func:`fetch_replica_id`): the same object for a consumer, so the
    common case allocates nothing."""
    replica_id = fetch_replica_id(buf, header)
    if replica_id < 0:
        return header
    return dataclasses.replace(header, replica_id=replica_id)
