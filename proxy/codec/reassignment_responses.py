"""AlterPartitionReassignments' error response: the code at the top level and for each partition. A caller that
refuses some partitions only clears the top level: the admin client fails every partition with a top-level error.
Used by :mod:`proxy.codec.responses`."""

from __future__ import annotations

from typing import Any, Protocol

from proxy.codec.messages import Message


class PartitionCodes(Protocol):
    default: int

    def partition(self, name: str | None, topic_id: Any, partition: int) -> int: ...


def reassignment_errors(version: int, request: Message, codes: PartitionCodes, message: str | None) -> dict[Any, Any]:
    return {
        "error_code": codes.default,
        "error_message": message,
        "responses": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": codes.partition(t.name, None, p.partition_index),
                        "error_message": message,
                    }
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ],
    }
