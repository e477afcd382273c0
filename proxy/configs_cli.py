"""``kafka-quota-proxy configs``: kafka-configs.sh for the proxy's quotas, written to the config topic.

    kafka-quota-proxy configs --bootstrap-server HOST:PORT --describe [--entity-type users --entity-name alice]
    kafka-quota-proxy configs --bootstrap-server HOST:PORT --alter --entity-type users --entity-name alice \\
        --entity-type clients --entity-name etl --add-config 'producer_byte_rate=1048576,consumer_byte_rate=2097152'
    kafka-quota-proxy configs --bootstrap-server HOST:PORT --alter --entity-type ips --entity-default \\
        --delete-config connection_creation_rate

Entity types ``users``, ``clients`` (user and client combined, as kafka-configs does) and ``ips``;
``--entity-default`` names the ``<default>`` entity. ``--entity-type proxy`` alters the proxy-wide dynamic
settings. Keys and values are checked before anything is written (as the proxy itself will check them); the
command prints what changed. kafka-python is the client (the proxy's own traffic uses aiokafka).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from config.dynamic import PROXY_KEY, DynamicEntries, RecordError, entity_key, parse_key
from config.dynamic_source import DEFAULT_TOPIC
from config.loader import parse_config
from quota.entity import DEFAULT

TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kafka-quota-proxy configs",
                                description="Describe or alter the proxy's dynamic quotas (the config topic).")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--topic", default=DEFAULT_TOPIC, help=f"the config topic (default {DEFAULT_TOPIC})")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true")
    action.add_argument("--alter", action="store_true")
    p.add_argument("--entity-type", action="append", default=[], choices=[*TYPES, "proxy"])
    p.add_argument("--entity-name", action="append", default=[], metavar="NAME")
    p.add_argument("--entity-default", action="append_const", const=DEFAULT, dest="entity_name")
    p.add_argument("--add-config", default="", metavar="K=V,K=V")
    p.add_argument("--delete-config", default="", metavar="K,K")
    return p


def entity_from_args(types: list[str], names: list[str]) -> dict:
    if types == ["proxy"]:
        return dict(PROXY_KEY)
    if len(types) != len(names) or not types:
        raise ValueError("give each --entity-type its --entity-name or --entity-default")
    entity = {}
    for kind, name in zip(types, names):
        if kind == "proxy":
            raise ValueError("--entity-type proxy stands alone")
        entity[TYPES[kind]] = name
    if "ip" in entity and len(entity) > 1:
        raise ValueError("ips cannot be combined with users or clients (KIP-612)")
    return entity


def parse_value(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_add(text: str) -> dict:
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--add-config: expected key=value, got {part!r}")
        out[key.strip()] = parse_value(value.strip())
    return out


def read_topic(bootstrap: str, topic: str, timeout_s: float = 30.0) -> dict[bytes, dict]:
    """The config topic's live entries (key -> values), read to its end."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="kafka-quota-proxy-configs",
                             enable_auto_commit=False, group_id=None)
    try:
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            return {}
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = consumer.end_offsets(tps)
        entries: dict[bytes, dict] = {}
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < end[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not read {topic} to its end in {timeout_s:.0f} s")
            for records in consumer.poll(timeout_ms=500).values():
                for r in records:
                    if r.value is None:
                        entries.pop(r.key, None)
                    else:
                        try:
                            entries[r.key] = json.loads(r.value)
                        except ValueError:
                            pass  # the proxy ignores it too
        return entries
    finally:
        consumer.close()


def write_record(bootstrap: str, topic: str, key: bytes, value: bytes | None) -> None:
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kafka-quota-proxy-configs")
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"cleanup.policy": "compact"})])
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="kafka-quota-proxy-configs", acks="all")
    try:
        producer.send(topic, key=key, value=value).get(30)
    finally:
        producer.close(10)


def show(entity: dict) -> str:
    if entity == PROXY_KEY:
        return "proxy settings"
    return ", ".join(f"{kind} {name}" for kind, name in sorted(entity.items()))


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    out, err = sys.stdout, sys.stderr
    try:
        entries = read_topic(args.bootstrap_server, args.topic)
    except Exception as exc:  # noqa: BLE001 - a CLI reports and exits
        print(f"configs: cannot read {args.topic} from {args.bootstrap_server}: {exc}", file=err)
        return 1
    if args.describe:
        wanted = None
        if args.entity_type:
            try:
                wanted = entity_from_args(args.entity_type, args.entity_name or [])
            except ValueError as exc:
                print(f"configs: {exc}", file=err)
                return EXIT_USAGE
        for key, values in sorted(entries.items()):
            try:
                entity = parse_key(key)
            except RecordError:
                continue
            if wanted is None or entity == wanted:
                print(f"Quota configs for {show(entity)} are "
                      + ", ".join(f"{k}={v}" for k, v in sorted(values.items())), file=out)
        return 0
    try:
        entity = entity_from_args(args.entity_type, args.entity_name or [])
        added = parse_add(args.add_config)
        deleted = [k.strip() for k in args.delete_config.split(",") if k.strip()]
    except ValueError as exc:
        print(f"configs: {exc}", file=err)
        return EXIT_USAGE
    if not added and not deleted:
        print("configs: --alter needs --add-config or --delete-config", file=err)
        return EXIT_USAGE
    key = entity_key(entity)
    before = dict(entries.get(key, {}))
    after = {k: v for k, v in {**before, **added}.items() if k not in deleted}
    value = json.dumps(after, sort_keys=True).encode() if after else None
    base = parse_config({"upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
                         "listeners": [{"name": "L", "bind": "127.0.0.1:0"}]})
    try:
        DynamicEntries().with_record(base, key, value)  # what the proxy will check, checked before writing
    except RecordError as exc:
        print(f"configs: not written: {exc}", file=err)
        return EXIT_USAGE
    try:
        write_record(args.bootstrap_server, args.topic, key, value)
    except Exception as exc:  # noqa: BLE001
        print(f"configs: cannot write to {args.topic}: {exc}", file=err)
        return 1
    changes = [f"{k}: {before.get(k, '(unset)')} -> {after.get(k, '(unset)')}"
               for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]
    print(f"Completed updating config for {show(entity)}: " + ("; ".join(changes) or "no change"), file=out)
    return 0
