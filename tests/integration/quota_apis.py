"""DescribeClientQuotas/AlterClientQuotas against the proxy: a proxy with dynamic config in front of Tansu, and
the requests kafka-python's admin client sends (tests/integration/test_client_quota_apis.py and its users)."""

from __future__ import annotations

from tests.harness import Tansu, free_port, proxy_config, start_proxy


def start(admins: list[str]):
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    config = proxy_config(proxy_port, broker_port,
                          quotas=[{"entity": {"user": "<default>"}, "consumer_byte_rate": 5000000}])
    config["dynamic_config"] = {}
    config["admin_principals"] = admins
    try:
        return start_proxy(config), broker
    except BaseException:
        broker.stop()
        raise


def send(bootstrap: str, request):
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="quota-admin")
    try:
        async def call():
            return await admin._manager.send(request)
        return admin._manager.run(call)
    finally:
        admin.close()


def alter(entries: list, validate_only: bool = False):
    from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest as R

    return R(version=1, validate_only=validate_only, entries=[
        R.EntryData(entity=[R.EntryData.EntityData(**part) for part in e["entity"]],
                    ops=[R.EntryData.OpData(**o) for o in e["ops"]]) for e in entries])


def describe(components: list, strict: bool = False):
    from kafka.protocol.admin.client_quotas import DescribeClientQuotasRequest as R

    return R(version=1, strict=strict, components=[R.ComponentData(**c) for c in components])


def op(key: str, value: float | None) -> dict:
    return {"key": key, "value": 0.0 if value is None else float(value), "remove": value is None}


def entries_of(response) -> dict:
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in response.entries}
