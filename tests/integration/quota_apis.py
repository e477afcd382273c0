"""DescribeClientQuotas/AlterClientQuotas against the proxy: a proxy with dynamic config in front of Tansu, and
the requests kafka-python's admin client sends (tests/integration/test_client_quota_apis.py and its users)."""

from __future__ import annotations

from tests.harness import Tansu, free_port, proxy_config, start_proxy


def start(admins: list[str], quotas: list | None = None):
    """A proxy with dynamic config in front of Tansu, ``quotas`` in its YAML (default: the ``<default>`` user's
    consumer_byte_rate 5,000,000); returns (proxy, broker)."""
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    if quotas is None:
        quotas = [{"entity": {"user": "<default>"}, "consumer_byte_rate": 5000000}]
    config = proxy_config(proxy_port, broker_port, quotas=quotas)
    config["dynamic_config"] = {}
    config["admin_principals"] = admins
    try:
        return start_proxy(config), broker
    except BaseException:
        broker.stop()
        raise


def send(bootstrap: str, request):
    """``request`` (a kafka-python protocol message, its version set) sent on a connection of its own to
    ``bootstrap``, and the answer decoded: framed, headed, encoded and decoded by kafka-python's public message API
    (``with_header``, ``encode``, ``decode``), so the proxy's codec is checked against another. kafka-python 3's
    admin client has no public call for these APIs, nor a public way to send a request it built."""
    import socket
    import struct

    from tests.integration.raw import recv_exactly

    host, port = bootstrap.rsplit(":", 1)
    request.with_header(correlation_id=1, client_id="quota-admin")
    answer_class = response_class(request)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request.encode(header=True, framed=True))
        size = struct.unpack(">i", recv_exactly(sock, 4))[0]
        answer = answer_class.decode(recv_exactly(sock, size), version=request.API_VERSION, header=True)
    assert answer.header.correlation_id == 1, answer.header
    return answer


def response_class(request):
    """The kafka-python response message of ``request``'s API (``FooRequest`` answered by ``FooResponse``, in the same
    module)."""
    import importlib

    module = importlib.import_module(type(request).__module__)
    return getattr(module, type(request).__name__.removesuffix("Request") + "Response")


def alter(entries: list, validate_only: bool = False):
    from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest as R

    return R(
        version=1,
        validate_only=validate_only,
        entries=[
            R.EntryData(
                entity=[R.EntryData.EntityData(**part) for part in e["entity"]],
                ops=[R.EntryData.OpData(**o) for o in e["ops"]],
            )
            for e in entries
        ],
    )


def describe(components: list, strict: bool = False):
    from kafka.protocol.admin.client_quotas import DescribeClientQuotasRequest as R

    return R(version=1, strict=strict, components=[R.ComponentData(**c) for c in components])


def op(key: str, value: float | None) -> dict:
    return {"key": key, "value": 0.0 if value is None else float(value), "remove": value is None}


def entries_of(response) -> dict:
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
        for entry in response.entries
    }


def described(bootstrap: str, entity: dict) -> dict:
    """The quota keys the proxy at ``bootstrap`` describes for exactly ``entity`` ({"user": "alice"}, {"client-id":
    "etl"}, {"ip": "10.0.0.9"}, several parts for a combined entity; a name of None or "<default>" for the default),
    {} when it has none: what ``kafka-configs --describe`` shows for it, one DescribeClientQuotas (strict) on a
    connection of its own. The proxy answers from the configuration its quota managers hold: a dynamic change is
    put in force in both in one step of its event loop, so a value described is a value in force."""
    components = [
        {"entity_type": kind, "match_type": 0, "match": name}
        if name not in (None, "<default>")
        else {"entity_type": kind, "match_type": 1, "match": None}
        for kind, name in entity.items()
    ]
    found = entries_of(send(bootstrap, describe(components, strict=True)))
    assert len(found) <= 1, found
    return next(iter(found.values()), {})


def write_config_entry(
    bootstrap: str, entity: dict, values: dict | None, topic: str = "__kafka_quota_proxy_configs"
) -> None:
    """One record to the config topic (``values`` None: a tombstone), as any Kafka client writes it: the entity as
    canonical JSON for the key, the quotas as JSON for the value (docs/configuration.md)."""
    import json

    from kafka import KafkaProducer

    from config.dynamic import entity_key

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        producer.send(topic, key=entity_key(entity), value=None if values is None else json.dumps(values).encode()).get(
            30
        )
    finally:
        producer.close(10)
