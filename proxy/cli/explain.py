"""``kafka-quota-proxy explain``: why is this client throttled? Asks a running proxy's ops port and prints the answer.

    kafka-quota-proxy explain --ops http://proxy-host:9464 --user alice --client-id etl --ip 10.0.0.7
    kafka-quota-proxy explain --ops http://proxy-host:9464 --client-id etl --ip 10.0.0.7 --json

The proxy answers ``GET /explain`` (:mod:`proxy.ops.explain`); with ``workers: N`` its parent gathers every worker's
answer. Text for people, ``--json`` for tools (the ops port's answer as it is). Exit codes: 0 answered (whatever the
verdict), 1 the proxy could not be asked or refused, 2 a bad command line or a question it cannot answer.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.parse
import urllib.request

from proxy.cli.quota_admin import EXIT_USAGE

DEFAULT_OPS = "http://127.0.0.1:9464"
TIMEOUT_S = 30.0  # the parent of workers: N asks each worker within 5 s
QUIET = {"UNLIMITED": "no limit applies", "BROKER": "enforced by the brokers, not the proxy"}  # named only


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kafka-quota-proxy explain",
        description="Say why a client is (or is not) "
        "throttled: for each quota, the entry that matches and its precedence level, the rate "
        "measured now against its limit, the throttle, mute or hold in force, and the "
        "proxy-wide states that take part.",
    )
    p.add_argument(
        "--ops",
        default=DEFAULT_OPS,
        metavar="URL",
        help=f"the proxy's ops port (its metrics.bind, as a URL or host:port; default {DEFAULT_OPS})",
    )
    p.add_argument(
        "--user",
        default="ANONYMOUS",
        help="the principal (SASL user or mapped mTLS subject; default ANONYMOUS: a client that does not authenticate)",
    )
    p.add_argument("--client-id", required=True, help="the client.id (may be empty: --client-id '')")
    p.add_argument("--ip", required=True, help="the client's source IP address as the proxy sees it")
    p.add_argument("--listener", help="only this listener (default: every listener)")
    p.add_argument("--topic", help="a topic the client writes or reads: its topic quotas are explained too")
    p.add_argument("--partition", type=int, help="a partition of --topic: its partition quotas are explained too")
    p.add_argument("--group", help="a consumer group the client is a member of: its request_rate is explained too")
    p.add_argument("--json", action="store_true", help="print the ops port's JSON answer as it is")
    return p


def ask(
    ops: str,
    user: str,
    client_id: str,
    ip: str,
    listener: str | None,
    topic: str | None = None,
    group: str | None = None,
    partition: int | None = None,
) -> dict:
    """The ops port's answer; raises urllib.error.HTTPError (its body says why) or OSError."""
    query = {"user": user, "client_id": client_id, "ip": ip}
    query |= ({"listener": listener} if listener else {}) | ({"topic": topic} if topic else {})
    query |= {"group": group} if group else {}
    query |= {"partition": str(partition)} if partition is not None else {}
    base = ops if "://" in ops else f"http://{ops}"  # host:port, as metrics.bind is written
    url = f"{base.rstrip('/')}/explain?{urllib.parse.urlencode(query)}"
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
        return json.loads(answer.read())


def _number(value) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 or value == int(value) else f"{value:,.2f}"


def _finding(f: dict) -> list[str]:
    head = f"  {f['quota']} ({f['scope']}): {f['verdict']}"
    if f["limit"] is not None:
        head += f", limit {_number(f['limit'])} {f['unit']}"
    if f["measured"] is not None:
        head += f", measured {_number(f['measured'])}"
    if f["tokens"] is not None:
        head += f", bucket {_number(f['tokens'])} of {_number(f['burst'])} tokens"
    if f["throttle_ms"]:
        head += f", throttle now {f['throttle_ms']} ms"
    if f["recent_throttle_ms"]:
        head += f", longest throttle in the last window span {f['recent_throttle_ms']} ms"
    lines = [head]
    if f["level"] is not None and f["entity"].startswith("/quota-groups/"):
        lines.append(f"      entry {f['entity']}: {f['level_path']}")
    elif f["level"] is not None:
        lines.append(f"      entry {f['entity']}: level {f['level']} of 8 ({f['level_path']})")
    elif f["entity"] is not None:
        lines.append(f"      set by {f['entity']}")
    if f["counted_in"] is not None:
        lines.append(f"      counted in {f['counted_in']}{' (shared <overflow> entity)' if f['overflow'] else ''}")
    lines += [f"      overrides {entry}" for entry in f["overridden"]]
    lines += [f"      {note}" for note in f["notes"]]
    return lines


def _answer(a: dict) -> list[str]:
    lines = [f"{'worker ' + a['worker'] if a['worker'] is not None else 'proxy'}: {a['verdict']}"]
    lines += [f"  because {reason}" for reason in a["reasons"]]
    for f in a["findings"]:
        if f["verdict"] not in QUIET:
            lines += _finding(f)
    for verdict, said in QUIET.items():
        named = [f"{f['quota']} ({f['scope']})" for f in a["findings"] if f["verdict"] == verdict]
        if named:
            lines.append(f"  {said}: {', '.join(named)}")
    lines.append(f"  open connections of this user from this IP: {a['connections_open']}")
    for c in a["connections"]:
        waits = "".join(
            (
                f", muted {c['muted_ms']} ms more for client-id {json.dumps(c['muted_for'] or '')}"
                + (f" by {c['muted_by']}" if c.get("muted_by") else "")
                if c["muted_ms"]
                else "",
                f", a request held {c['held_ms']} ms more" if c["held_ms"] else "",
            )
        )
        lines.append(f"    {c['peer']} on {c['listener']}: {c['mute_state']}{waits}")
    p = a["proxy"]
    lines.append(
        f"  proxy: quota.mode {'shadow (nothing applied)' if p['shadow_mode'] else 'enforce'}, "
        f"quota.scope {p['scope']}" + (f"; {p['cluster']}" if p["cluster"] else "")
    )
    v = p["volume"]
    if v is not None:
        ages = ", ".join(f"broker {b} {age / 1000:.0f} s" for b, age in v["snapshot_age_ms"].items()) or "none"
        lines.append(
            f"  volume usage: {v['state']} (factor {v['factor']:.3f}); snapshot ages: {ages}; fresh for "
            f"{v['freshness_ms'] / 1000:g} s"
            + (
                f"; no fresh data from brokers {v['missing_data']} ({v['missing_data_action']} applies)"
                if v["missing_data"] or v["awaiting_data"]
                else ""
            )
        )
    full = [key for key, (n, cap) in p["tracked"].items() if n >= cap]
    if full:
        lines.append(f"  full tables (quota.max.tracked.entities): {', '.join(full)}: new entities share <overflow>")
    return lines


def render_text(whole: dict) -> str:
    who = whole["who"]
    lines = [
        f"user {json.dumps(who['user'])}, client-id {json.dumps(who['client_id'])}, from {who['ip']}"
        f"{' on ' + who['listener'] if who['listener'] else ''}: {whole['verdict']}"
    ]
    if whole.get("note"):
        lines.append(f"  {whole['note']}")
    if whole["unanswered"]:
        lines.append(f"  workers that did not answer: {', '.join(whole['unanswered'])}")
    for answer in whole["answers"]:
        lines += [""] + _answer(answer)
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        whole = ask(args.ops, args.user, args.client_id, args.ip, args.listener, args.topic, args.group, args.partition)
    except urllib.error.HTTPError as exc:
        why = exc.read(2000).decode("utf-8", "replace").strip()
        print(f"kafka-quota-proxy explain: {args.ops} answered {exc.code}: {why}", file=sys.stderr)
        return EXIT_USAGE if exc.code == 400 else 1
    except (OSError, ValueError) as exc:
        print(f"kafka-quota-proxy explain: cannot ask {args.ops}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(whole, indent=2) if args.json else render_text(whole), end="" if not args.json else "\n")
    return 0
