"""``kafka-quota-proxy configs``: kafka-configs.sh for the proxy's quotas, through the proxy's admin-checked APIs.

    kafka-quota-proxy configs --bootstrap-server PROXY --describe [--entity-type users [--entity-name alice]]
    kafka-quota-proxy configs --bootstrap-server PROXY --alter --entity-type users --entity-name alice \\
        --entity-type clients --entity-name etl --add-config 'producer_byte_rate=1048576,consumer_byte_rate=2097152'
    kafka-quota-proxy configs --bootstrap-server PROXY --alter --entity-type ips --entity-default \\
        --delete-config connection_creation_rate
    kafka-quota-proxy configs --bootstrap-server PROXY --alter --entity-type topics --entity-name orders \\
        --add-config producer_byte_rate=10485760
    kafka-quota-proxy configs --bootstrap-server PROXY --alter --entity-type topics --entity-name orders \\
        --entity-type partitions --entity-default --add-config producer_byte_rate=1048576
    kafka-quota-proxy configs --bootstrap-server PROXY --alter --entity-type groups --entity-name payments \\
        --add-config request_rate=5
    kafka-quota-proxy configs --bootstrap-server PROXY --alter --entity-type brokers --entity-default \\
        --add-config 'max.connections=1000,max.connections.per.ip.overrides=[10.0.0.7:5,10.0.0.8:5]'
    kafka-quota-proxy configs --bootstrap-server PROXY --alter --user alice --client etl \\
        --add-config-file quotas.properties --command-config admin.properties

kafka-configs' shorthands stand for the --entity-type forms: ``--user NAME``, ``--client NAME``, ``--ip NAME``,
``--user-defaults``, ``--client-defaults``, ``--ip-defaults`` and ``--broker-defaults`` (the proxy's settings);
``--add-config-file`` takes the keys to add from a properties file.

Quotas (``users``, ``clients`` -- user and client combined, as kafka-configs does --, ``ips``, ``topics``, the
proxy's per-topic byte rates, entity type ``topic`` on the wire; ``topics`` with ``partitions``, its per-partition
byte rates, entity types ``topic`` and ``partition``; and ``groups``, its per-group request rates, entity
type ``group``; not kafka-configs' ``groups``, the KIP-848 group configs) go as
AlterClientQuotas / DescribeClientQuotas, the proxy-wide settings (``brokers --entity-default``, or its alias
``proxy``) as IncrementalAlterConfigs / DescribeConfigs of the BROKER resource ``""``, exactly as kafka-configs.sh
sends them: the proxy checks ``admin_principals`` and the values, and writes its config topic itself; this command
never touches the topic. ``--command-config FILE`` gives Kafka client properties (:mod:`proxy.cli.command_config`).
Exit codes: 0 done, 1 refused or not possible (the server's message is printed), 2 a bad command line.
kafka-python is the client (the proxy's own traffic uses aiokafka).
"""

from __future__ import annotations

import argparse
import sys

from config.dynamic import DYNAMIC_SETTINGS, PROXY_KEY
from proxy.cli.command_config import CommandConfigError, read_command_config, read_properties
from proxy.cli.quota_admin import EXIT_USAGE, Failed, QuotaAdmin
from proxy.codec.enums import DYNAMIC_DEFAULT_BROKER_CONFIG
from quota.primitives.entity import DEFAULT

TYPES = {
    "users": "user",
    "clients": "client-id",
    "ips": "ip",
    "topics": "topic",
    "partitions": "partition",
    "groups": "group",
}
PROXY_TYPES = ("brokers", "proxy")
ENTITY_FLAGS = {"--user": "users", "--client": "clients", "--ip": "ips"}  # kafka-configs' shorthands
DEFAULT_FLAGS = {
    "--user-defaults": "users",
    "--client-defaults": "clients",
    "--ip-defaults": "ips",
    "--broker-defaults": "brokers",
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kafka-quota-proxy configs",
        description="Describe or alter the proxy's "
        "dynamic quotas and settings, through the proxy, as kafka-configs.sh does.",
    )
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="the proxy")
    p.add_argument(
        "--command-config",
        metavar="FILE",
        help="Kafka client properties, as kafka-configs takes them: "
        "security.protocol, sasl.*, ssl.truststore.*, ssl.keystore.*, ssl.ca.location, ...",
    )
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true")
    action.add_argument("--alter", action="store_true")
    p.add_argument("--entity-type", action="append", default=[], choices=[*TYPES, *PROXY_TYPES])
    p.add_argument("--entity-name", action="append", default=[], metavar="NAME")
    p.add_argument("--entity-default", action="append_const", const=DEFAULT, dest="entity_name")
    for flag, kind in ENTITY_FLAGS.items():
        p.add_argument(flag, metavar="NAME", help=f"--entity-type {kind} --entity-name NAME")
    for flag, kind in DEFAULT_FLAGS.items():
        p.add_argument(flag, action="store_true", help=f"--entity-type {kind} --entity-default")
    add = p.add_mutually_exclusive_group()
    add.add_argument("--add-config", default="", metavar="K=V,K=[V,V]")
    add.add_argument(
        "--add-config-file",
        metavar="FILE",
        help="a properties file of the keys to add (key=value lines, as --add-config's)",
    )
    p.add_argument("--delete-config", default="", metavar="K,K")
    return p


def entity_args(args) -> tuple[list[str], list[str]]:
    """The entity types and names the command line gives: kafka-configs' --user/--client/--ip NAME and --*-defaults
    shorthands, or --entity-type with --entity-name/--entity-default (not both kinds, as kafka-configs says)."""
    flags = [(kind, getattr(args, flag[2:].replace("-", "_"))) for flag, kind in ENTITY_FLAGS.items()]
    flags = [(kind, name) for kind, name in flags if name is not None]
    flags += [(kind, DEFAULT) for flag, kind in DEFAULT_FLAGS.items() if getattr(args, flag[2:].replace("-", "_"))]
    if not flags:
        return args.entity_type, args.entity_name or []
    if args.entity_type or args.entity_name:
        raise ValueError(
            "--entity-type, --entity-name and --entity-default do not go with --user, --client, --ip "
            "or their --*-defaults (as in kafka-configs)"
        )
    return [kind for kind, _ in flags], [name for _, name in flags]


def added_config(args) -> dict:
    """What --add-config or --add-config-file adds (a value as --add-config reads it, square brackets kept off)."""
    if args.add_config_file is None:
        return parse_add(args.add_config)
    added = {}
    for key, value in read_properties(args.add_config_file, "--add-config-file").items():
        value = value.strip()
        added[key] = parse_value(value[1:-1] if value.startswith("[") and value.endswith("]") else value)
    return added


def entity_from_args(types: list[str], names: list[str], describing: bool = False) -> dict:
    """The entity the command names: ``{type: name}`` (a name None, when describing, matches any), or
    :data:`PROXY_KEY` for the proxy-wide settings."""
    if any(t in PROXY_TYPES for t in types):
        if len(types) > 1:
            raise ValueError(f"--entity-type {types[0] if types[0] in PROXY_TYPES else types[1]} stands alone")
        if types == ["brokers"] and names != [DEFAULT]:
            raise ValueError(
                "the proxy's settings are cluster-wide: --entity-type brokers --entity-default (one "
                "broker's own configs: kafka-configs.sh against that broker)"
            )
        if names not in ([], [DEFAULT]):
            raise ValueError("--entity-type proxy takes no --entity-name")
        return dict(PROXY_KEY)
    if not types or len(names) > len(types) or (len(names) < len(types) and not describing):
        raise ValueError("give each --entity-type its --entity-name or --entity-default")
    entity: dict = {}
    for kind, name in zip(types, names + [None] * (len(types) - len(names))):
        if TYPES[kind] in entity:
            raise ValueError(f"{kind} given twice")
        entity[TYPES[kind]] = name
    if "ip" in entity and len(entity) > 1:
        raise ValueError("ips cannot be combined with users or clients (KIP-612)")
    if "partition" in entity and "topic" not in entity:
        raise ValueError("a partition is a topic's: --entity-type topics --entity-name NAME --entity-type partitions")
    if "topic" in entity and len(entity) > (2 if "partition" in entity else 1):
        raise ValueError("topics stand alone (or with partitions): a topic quota counts every client's bytes")
    if "group" in entity and len(entity) > 1:
        raise ValueError("groups stand alone: a group quota counts every member's requests")
    return entity


def parse_value(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_add(text: str) -> dict:
    """``k=v,k=v``; a value holding commas in square brackets, as kafka-configs takes lists: ``k=[a:1,b:2]``."""
    out = {}
    for part in _split_top_level(text):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--add-config: expected key=value, got {part!r}")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key.strip()] = parse_value(value)
    return out


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def show(entity: dict) -> str:
    if entity == PROXY_KEY:
        return "the proxy's settings (brokers default)"
    return ", ".join(f"{kind} {name}" for kind, name in sorted(entity.items()))


def number(value) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        try:
            types, names = entity_args(args)
            entity = entity_from_args(types, names, describing=args.describe) if types or args.alter else None
            added = added_config(args)
            deleted = [k.strip() for k in args.delete_config.split(",") if k.strip()]
            security = read_command_config(args.command_config) if args.command_config else {}
        except (ValueError, CommandConfigError) as exc:
            raise Failed(str(exc), EXIT_USAGE) from None
        if args.alter and not added and not deleted:
            raise Failed("--alter needs --add-config, --add-config-file or --delete-config", EXIT_USAGE)
        if args.describe and (added or deleted):
            raise Failed("--add-config, --add-config-file and --delete-config go with --alter", EXIT_USAGE)
        both = sorted(set(added) & set(deleted))
        if both:
            raise Failed(f"{', '.join(both)}: both added and deleted", EXIT_USAGE)
        check_keys(entity, added, deleted)
        with QuotaAdmin(args.bootstrap_server, security) as admin:
            if entity == PROXY_KEY:
                return settings_command(admin, args.alter, added, deleted)
            return quotas_command(admin, entity, args.alter, added, deleted)
    except Failed as exc:
        print(f"configs: {exc}", file=sys.stderr)
        return exc.code


def quotas_command(admin, entity: dict | None, alter: bool, added: dict, deleted: list[str]) -> int:
    out = sys.stdout
    if not alter:
        for found, values in admin.describe_quotas(entity or {}, strict=bool(entity)):
            print(
                f"Quota configs for {show(found)} are "
                + ", ".join(f"{k}={number(v)}" for k, v in sorted(values.items())),
                file=out,
            )
        return 0
    assert entity is not None  # --alter names its entity (entity_from_args), or the command stopped before
    before = dict(next((values for found, values in admin.describe_quotas(entity, strict=True) if found == entity), {}))
    unset = [k for k in deleted if k not in before]
    if unset:
        raise Failed(f"{', '.join(unset)}: not set for {show(entity)}; nothing to delete (nothing written)")
    admin.alter_quotas(entity, added, deleted)
    after = {k: v for k, v in {**before, **added}.items() if k not in deleted}
    report(show(entity), before, after)
    return 0


def check_keys(entity: dict | None, added: dict, deleted: list[str]) -> None:
    """What the command line alone shows to be wrong (the server checks the rest)."""
    if entity == PROXY_KEY:
        others = [k for k in [*added, *deleted] if k not in DYNAMIC_SETTINGS]
        if others:
            raise Failed(
                f"{', '.join(others)}: not a proxy setting (the proxy's: {', '.join(DYNAMIC_SETTINGS)})", EXIT_USAGE
            )
        return
    bad = [k for k, v in added.items() if isinstance(v, str)]
    if bad:
        raise Failed(
            f"{bad[0]}={added[bad[0]]}: a quota is a number (AlterClientQuotas carries numbers; an entry's mode "
            "or on_exceed is set in the YAML or the config topic, the proxy-wide quota.mode with --entity-type "
            "brokers --entity-default)",
            EXIT_USAGE,
        )


def settings_command(admin, alter: bool, added: dict, deleted: list[str]) -> int:
    current = admin.describe_settings()
    if not alter:
        print("Default configs for brokers in the cluster (the proxy's settings) are:", file=sys.stdout)
        for name, (value, source) in current.items():
            origin = "dynamic" if source == DYNAMIC_DEFAULT_BROKER_CONFIG else "static or default"
            print(f"  {name}={value} ({origin})", file=sys.stdout)
        return 0
    unset = [k for k in deleted if current.get(k, (None, None))[1] != DYNAMIC_DEFAULT_BROKER_CONFIG]
    if unset:
        raise Failed(f"{', '.join(unset)}: not set dynamically; nothing to delete (nothing written)")
    admin.alter_settings({k: str(v) for k, v in added.items()}, deleted)
    before = {k: value for k, (value, _) in current.items()}
    after = {**before, **{k: str(v) for k, v in added.items()}, **{k: "(its YAML or default value)" for k in deleted}}
    report(show(PROXY_KEY), before, after)
    return 0


def report(what: str, before: dict, after: dict) -> None:
    changes = [
        f"{k}: {number(before[k]) if k in before else '(unset)'} -> {number(after[k]) if k in after else '(unset)'}"
        for k in sorted(set(before) | set(after))
        if before.get(k) != after.get(k)
    ]
    print(f"Completed updating config for {what}: " + ("; ".join(changes) or "no change"), file=sys.stdout)
