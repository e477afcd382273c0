"""The usage delta's encoding (quota.sharing.usage_encoding): names written once, rows as columns, zlib for what a sidecar
publishes, and a clear error naming the field for every malformed part."""

from __future__ import annotations

import json
import zlib

import pytest

from quota.sharing.usage_delta import UsageDelta
from quota.sharing.usage_encoding import MAX_DECODED_BYTES, UsageDeltaError, decode, encode

pytestmark = pytest.mark.long_running(seconds=10)


def raw_of(data: bytes) -> dict:
    """The encoding's lines as one object (what decode also takes: every list on the first line)."""
    first, *rest = data.split(b"\n")
    raw = json.loads(first)
    for line in rest:
        path, part = json.loads(line)
        if "." in path:
            raw.setdefault(path[:-2], [[], [], []])[int(path[-1])].extend(part)
        else:
            raw.setdefault(path, []).extend(part)
    return raw


def many(n: int, kind: str = "produce") -> UsageDelta:
    rows = tuple((f"tenant-{i:06d}", f"tenant-{i:06d}-app", float(1000 + i)) for i in range(n))
    return UsageDelta("a", **{kind: rows})


def test_each_name_is_written_once_and_rows_come_back_whatever_their_order():
    rows = (("bob", "p", 3), ("alice", "q", 2.5), ("alice", "p", 7))
    delta = UsageDelta("a", produce=rows, fetch=rows[::-1], mutations=rows[1:], requests=rows[:2])
    raw = raw_of(encode(delta))
    assert raw["users"] == ["alice", "bob"] and raw["clients"] == ["p", "q"]
    back = decode(encode(delta))
    for kind in ("produce", "fetch", "mutations", "requests"):
        assert sorted(getattr(back, kind)) == sorted(getattr(delta, kind))


def test_compressed_it_decodes_the_same_and_is_far_smaller_for_many_entities():
    delta = many(25_000)
    plain, packed = encode(delta), encode(delta, compress=True)
    assert decode(packed) == decode(plain) == delta
    assert len(packed) < len(plain) / 4
    lines = plain.split(b"\n")
    assert len(lines) == 1 + 3 + 3 + 3 * 3  # the header; users, clients, each column: 10,000 items a line
    with pytest.raises(UsageDeltaError, match="produce: columns of 25000, 25000 and 20000 items"):
        decode(b"\n".join(lines[:-1]))  # a line lost


def test_a_line_that_is_not_a_part_is_named():
    data = encode(many(3))
    with pytest.raises(UsageDeltaError, match=r"line 6: expected \[one of"):
        decode(data + b'\n["nonsense",[1]]')
    with pytest.raises(UsageDeltaError, match="line 6 not JSON"):
        decode(data + b"\n[")


@pytest.mark.parametrize(
    "change, where",
    [
        (lambda raw: raw["produce"][0].__setitem__(1, "x"), r"produce\[0\]\[1\]: expected an integer"),
        (lambda raw: raw["produce"][1].__setitem__(2, 5), r"produce\[1\]\[2\]: index 6 outside the 3 clients"),
        (lambda raw: raw["produce"][0].__setitem__(0, -1), r"produce\[0\]\[0\]: index -1 outside the 3 users"),
        (lambda raw: raw["produce"][2].__setitem__(1, 10**400), r"produce\[2\]\[1\]: expected a finite number"),
        (lambda raw: raw["produce"][2].__setitem__(2, True), r"produce\[2\]\[2\]: expected a finite number"),
        (lambda raw: raw["produce"].pop(), r"produce: expected three lists"),
        (lambda raw: raw["produce"][2].pop(), r"produce: columns of 3, 3 and 2 items"),
        (lambda raw: raw["users"].__setitem__(1, 7), r"users\[1\]: expected a string"),
        (lambda raw: raw["producer_ids"][0].__setitem__(0, 9), r"producer_ids\[0\]\[0\]: index 9 outside the 3 users"),
    ],
)
def test_a_malformed_part_is_named(change, where):
    raw = raw_of(
        encode(
            UsageDelta(
                "a", produce=(("u0", "c0", 1), ("u1", "c1", 2), ("u2", "c2", 3)), producer_ids=(("u0", 1, (5,)),)
            )
        )
    )
    change(raw)
    with pytest.raises(UsageDeltaError, match=where):
        decode(json.dumps(raw).encode())


def test_broken_or_oversized_compression_is_refused():
    packed = encode(many(100), compress=True)
    with pytest.raises(UsageDeltaError, match="cut short"):
        decode(packed[:-10])
    with pytest.raises(UsageDeltaError, match="not zlib"):
        decode(b"\x78\x00\x00")
    bomb = zlib.compress(b" " * (MAX_DECODED_BYTES + 1))  # 64 MiB of blanks: 65 KB compressed
    with pytest.raises(UsageDeltaError, match="more than"):
        decode(bomb)


def test_a_negative_byte_rate_or_count_is_malformed_a_mutation_refund_is_not():
    """Issue 44, T8: a record written straight to the usage topic with a negative produce usage gave its tenant
    5 x its quota on every sidecar. Bytes and connection counts are never given back; mutation tokens are (KIP-599
    refunds of what the broker did not do); nor are requests counted by request_rate."""
    for kind in ("produce", "fetch", "requests"):
        with pytest.raises(UsageDeltaError, match=rf"{kind}\[2\]\[\d\]: expected a usage from 0, got -2.5"):
            decode(encode(UsageDelta("a", **{kind: (("bob", "p", 3), ("alice", "q", -2.5))})))
    for field in ("listeners", "ips"):
        with pytest.raises(UsageDeltaError, match="expected a count from 0"):
            decode(encode(UsageDelta("a", **{field: (("x", -4),)})))
    with pytest.raises(UsageDeltaError, match="expected a count from 0"):
        decode(encode(UsageDelta("a", open_connections=(("ip", "10.0.0.1", -1),))))
    refund = decode(encode(UsageDelta("a", mutations=(("bob", "p", -3.0),))))
    assert list(refund.mutations) == [("bob", "p", -3.0)]
