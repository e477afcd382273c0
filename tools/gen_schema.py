"""Generate ``proxy/codec/schema_table.py`` from Kafka's protocol message definitions.

Usage::

    python tools/gen_schema.py NEW_DIR [--legacy OLD_DIR] [-o proxy/codec/schema_table.py]

``NEW_DIR`` holds Kafka 4.x ``*Request.json``/``*Response.json`` files (Kafka's
``clients/src/main/resources/common/message``; kafka-python 3.x ships a copy under
``kafka/protocol/schemas/resources``). ``OLD_DIR`` holds Kafka 3.9's: versions that 4.0 removed
(KIP-896) are taken from there. When the 3.9 definition lays out an old version exactly as the
newest definition does (the usual case: Kafka keeps ``"versions": "0+"`` on fields), the newest
definition's valid range is simply widened; otherwise the old version gets its own segment.

KIP-932's early-access versions (ShareGroupHeartbeat, ShareFetch and ShareAcknowledge v0, served by Kafka 4.0 and
removed in 4.1) are taken the same way from Kafka 4.0's definitions (its ``kafka-clients`` jar carries them under
``common/message``)::

    python tools/gen_schema.py NEW_DIR --legacy KAFKA_4_0_DIR --update 76 78 79

Only the facts (field names, types, versions, tags, defaults) are carried over; the output is a
plain Python literal that :mod:`proxy.codec.schema` compiles into readers and writers.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

# The APIs the proxy decodes (the rest pass through as opaque bytes).
DECODED = {
    0: "Produce",
    1: "Fetch",
    3: "Metadata",
    10: "FindCoordinator",
    17: "SaslHandshake",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    22: "InitProducerId",
    36: "SaslAuthenticate",
    37: "CreatePartitions",
    48: "DescribeClientQuotas",
    49: "AlterClientQuotas",
    60: "DescribeCluster",
    35: "DescribeLogDirs",  # the proxy's own requests only (volume usage from DescribeLogDirs)
    41: "DescribeDelegationToken",  # the proxy's own requests only (a delegation token's owner)
    65: "DescribeTransactions",  # the proxy's own requests only (whether a transactional id is new, at PAUSE)
    # Writes that can name the proxy's internal topics (refused for non-admins), and the broker-config APIs that
    # carry the proxy-wide dynamic settings.
    21: "DeleteRecords",
    24: "AddPartitionsToTxn",
    32: "DescribeConfigs",
    33: "AlterConfigs",
    44: "IncrementalAlterConfigs",
    # Writes to __consumer_offsets a tenant can fill with metadata: capped and charged (issue 44, T3).
    8: "OffsetCommit",
    28: "TxnOffsetCommit",
    # What else a tenant can make the broker write, bounded at a volume's PAUSE: the group's record (its members'
    # subscriptions and assignments) and transaction markers.
    11: "JoinGroup",
    14: "SyncGroup",
    27: "WriteTxnMarkers",
    68: "ConsumerGroupHeartbeat",  # KIP-848: a member's subscription, written to __consumer_offsets
    76: "ShareGroupHeartbeat",  # KIP-932: a share group member's subscription and rack, written there too
    78: "ShareFetch",  # KIP-932: its acknowledgements, written to __share_group_state
    79: "ShareAcknowledge",  # likewise
    88: "StreamsGroupHeartbeat",  # KIP-1071: a Streams member's description and its group's topology, likewise
    47: "OffsetDelete",  # a tombstone a partition named to __consumer_offsets (a partition named twice: two)
    91: "AlterShareGroupOffsets",  # KIP-932: a share group's state rewritten (both coordinators' topics), at PAUSE none
    92: "DeleteShareGroupOffsets",  # likewise
    # An operator's reassignment, judged at PAUSE: no new replica on a broker with a volume at its hard limit.
    45: "AlterPartitionReassignments",
}
MAX = 0x7FFF
INT_TYPES = {"int8", "int16", "uint16", "int32", "int64"}


def snake(name: str) -> str:
    """``ThrottleTimeMs`` -> ``throttle_time_ms``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def load(path: Path) -> dict:
    """Kafka's JSON allows ``//`` comment lines; strip them and parse."""
    text = "\n".join(line for line in path.read_text().splitlines() if not line.strip().startswith("//"))
    return json.loads(text)


def vrange(spec: str | None) -> tuple[int, int] | None:
    """``"3+"`` -> (3, MAX); ``"0-12"`` -> (0, 12); ``"none"``/None -> None."""
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return (int(spec[:-1]), MAX)
    lo, _, hi = spec.partition("-")
    return (int(lo), int(hi or lo))


def default_value(ftype: str, raw, nullable: bool):
    """The Python value of a field's default, following Kafka's generator rules."""
    if ftype.startswith("[]"):
        return None if raw == "null" else ()
    if raw == "null":
        return None
    if isinstance(raw, (bool, int, float)):
        return raw
    if ftype in INT_TYPES:
        return int(raw, 0) if raw not in (None, "") else 0
    if ftype == "float64":
        return float(raw) if raw not in (None, "") else 0.0
    if ftype == "bool":
        return raw == "true"
    if ftype == "string":
        return raw if raw is not None else ""
    if ftype == "uuid":
        return None  # the zero UUID; filled in by the compiler
    if ftype == "bytes":
        return b""
    if ftype == "records":
        return None
    return None  # structs: a fresh default instance


def convert_fields(fields: list, common: dict) -> tuple:
    out = []
    for f in fields:
        ftype = f["type"]
        elem = ftype[2:] if ftype.startswith("[]") else ftype
        children = f.get("fields")
        is_struct = elem[:1].isupper()
        if is_struct and children is None:
            children = common[elem]["fields"]
        kind = ("[]struct" if ftype.startswith("[]") else "struct") if is_struct else ftype
        nullable = vrange(f.get("nullableVersions"))
        out.append(
            (
                snake(f["name"]),
                kind,
                vrange(f["versions"]),
                nullable,
                f.get("tag"),
                vrange(f.get("taggedVersions")),
                default_value(ftype, f.get("default"), nullable is not None),
                bool(f.get("ignorable", False)),
                convert_fields(children, common) if is_struct else None,
                elem if is_struct else None,
            )
        )
    return tuple(out)


def layout(fields: tuple, version: int, flexible: bool) -> tuple:
    """The wire layout of ``fields`` at ``version``: what must match for two definitions to agree."""
    out = []
    for name, kind, vers, nullable, tag, tagged, _default, _ign, children, _sname in fields:
        if not vers[0] <= version <= vers[1]:
            continue
        is_tagged = flexible and tag is not None and tagged and tagged[0] <= version <= tagged[1]
        if tag is not None and not is_tagged:
            continue
        null = bool(nullable and nullable[0] <= version <= nullable[1])
        sub = layout(children, version, flexible) if children else None
        out.append((name, kind, null, tag if is_tagged else None, sub))
    return tuple(out)


def convert(spec: dict) -> dict:
    common = {c["name"]: c for c in spec.get("commonStructs", ())}
    return {
        "name": spec["name"],
        "valid": vrange(spec["validVersions"]),
        "flexible": (vrange(spec.get("flexibleVersions")) or (None,))[0],
        "fields": convert_fields(spec["fields"], common),
    }


def build(new_dir: Path, old_dir: Path | None, keys=None) -> dict:
    table = {}
    for key, api in DECODED.items():
        if keys is not None and key not in keys:
            continue
        for direction in ("request", "response"):
            fname = f"{api}{direction.capitalize()}.json"
            new = convert(load(new_dir / fname))
            segments = [new]
            if old_dir is not None and (old_dir / fname).exists():
                old = convert(load(old_dir / fname))
                lo = new["valid"][0]
                for v in range(old["valid"][0], lo):
                    oflex = old["flexible"] is not None and v >= old["flexible"]
                    nflex = new["flexible"] is not None and v >= new["flexible"]
                    if oflex == nflex and layout(old["fields"], v, oflex) == layout(new["fields"], v, nflex):
                        new["valid"] = (min(new["valid"][0], v), new["valid"][1])
                    else:
                        seg = dict(old, valid=(v, v))
                        segments.append(seg)
            table[(key, direction)] = tuple(segments)
    return table


HEADER = '''"""Kafka protocol message schemas for the APIs the proxy decodes. GENERATED, do not edit.

Made by ``tools/gen_schema.py`` from Kafka's message definitions (4.x, widened with 3.9's removed
versions). Key: ``(api_key, "request" | "response")``; value: segments of
``{"name", "valid": (lo, hi), "flexible": first_flexible_or_None, "fields": FIELDS}``.
A field is ``(name, kind, versions, nullable_versions, tag, tagged_versions, default, ignorable,
children, struct_name)``; version ranges are ``(lo, hi)`` with hi=0x7FFF for "and later".
"""

# fmt: off
SCHEMAS = '''


def render_fields(fields: tuple, indent: str) -> str:
    """One field per line; children nested below their parent."""
    lines = []
    for f in fields:
        head = ", ".join(repr(x) for x in f[:8])
        if f[8] is None:
            lines.append(f"{indent}({head}, None, None),")
        else:
            lines.append(f"{indent}({head}, (")
            lines.append(render_fields(f[8], indent + "    "))
            lines.append(f"{indent}), {f[9]!r}),")
    return "\n".join(lines)


def render(table: dict) -> str:
    out = ["{"]
    for key in sorted(table):
        out.append(f"    {key!r}: (")
        for seg in table[key]:
            out.append(
                f'        {{"name": {seg["name"]!r}, "valid": {seg["valid"]!r}, "flexible": {seg["flexible"]!r}, "fields": ('
            )
            out.append(render_fields(seg["fields"], " " * 12))
            out.append("        )},")
        out.append("    ),")
    out.append("}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("new_dir", type=Path)
    ap.add_argument("--legacy", type=Path, default=None)
    ap.add_argument("-o", "--output", type=Path, default=Path("proxy/codec/schema_table.py"))
    ap.add_argument(
        "--update",
        type=int,
        nargs="+",
        metavar="API_KEY",
        default=None,
        help="regenerate only these API keys, keeping the output's other entries as they are",
    )
    args = ap.parse_args(argv)
    table = build(args.new_dir, args.legacy, None if args.update is None else set(args.update))
    if args.update is not None:
        existing: dict = {}
        exec(compile(args.output.read_text(), str(args.output), "exec"), existing)  # noqa: S102 - our own file
        table = {**{k: v for k, v in existing["SCHEMAS"].items() if k[0] not in args.update}, **table}
    args.output.write_text(HEADER + render(table) + "\n")
    print(f"wrote {args.output}: {len(table)} schemas", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
