"""Whether a Fetch comes from a follower broker, read before the frame's first byte moves (where it can be), and
what a consumer byte rate needs of a whole Fetch request: the follower's id and ``MaxBytes``, skimmed, not decoded.

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
from collections.abc import Callable
from functools import cache

from proxy.codec.apis import FETCH, FETCH_REPLICA_STATE_SINCE
from proxy.codec.header import Incomplete, RequestHeader
from proxy.codec.messages import decode_request
from proxy.codec.primitives import Bytes
from proxy.codec.skim import fixed_offset, tag_of, tagged_fields

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


def fetch_body_facts(version: int, body: bytes | memoryview) -> tuple[int, int]:
    """(the ``ReplicaId`` of a follower's ``ReplicaState``, -1 for a consumer or before v15; ``MaxBytes``) of a whole
    Fetch request ``body`` of v3+. The body is skimmed (:mod:`proxy.codec.skim`: checked to be laid out as its version
    says, nothing built) and decoded only when it carries a ``ReplicaState``, which a consumer's never does."""
    return body_facts_reader(version)(body)


def fact_places(version: int) -> tuple[int, int]:
    """(the tag of a Fetch request's ``ReplicaState``, -1 before v15; the offset of its ``MaxBytes``) in ``version``
    (v3+): where :func:`fetch_body_facts` reads."""
    replica_tag = tag_of(FETCH, "request", version, "replica_state") if version >= FETCH_REPLICA_STATE_SINCE else -1
    return replica_tag, fixed_offset(FETCH, "request", version, "max_bytes")


@cache
def body_facts_reader(version: int) -> Callable[[bytes | memoryview], tuple[int, int]]:
    """:func:`fetch_body_facts` for Fetch ``version``, its field's tag and offset found once (a consumer sends
    hundreds of Fetch requests a second; a plan keeps the reader of its version)."""
    replica_tag, max_bytes_at = fact_places(version)
    unpack_from = _INT32.unpack_from

    def facts(body: bytes | memoryview) -> tuple[int, int]:
        tags = tagged_fields(FETCH, "request", version, body)  # checks the layout, whatever the version
        replica_id = -1
        if replica_tag in tags:
            replica_id = decode_request(FETCH, version, body).replica_state.replica_id
        max_bytes: int = unpack_from(body, max_bytes_at)[0]
        return replica_id, max_bytes

    return facts


def with_max_bytes(version: int, body: Bytes, max_bytes: int) -> bytes:
    """The Fetch request ``body`` (v3+) with ``MaxBytes`` set to ``max_bytes`` and every other byte as it was: what
    decoding it, setting the field and encoding it again writes, without the two."""
    out = bytearray(body)
    _INT32.pack_into(out, fixed_offset(FETCH, "request", version, "max_bytes"), max_bytes)
    return bytes(out)
