"""A record batch of a given size and a connection scope with given byte-rate quotas, for the request-path tests."""

from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatchBuilder

from config.loader import parse_config
from proxy.apis import ConnectionScope
from proxy.cluster.topics import Topics
from proxy.enforcement.proxy_quotas import ProxyQuotas


def batch(n_records: int, value_size: int = 100, base_offset: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i in range(n_records):
        builder.append(i, timestamp=None, key=None, value=b"x" * value_size, headers=[])
    raw = bytearray(builder.build())
    raw[0:8] = base_offset.to_bytes(8, "big")
    return bytes(raw)


def scope_with(quotas, clock, **settings):
    return ConnectionScope(None, Topics(), proxy_quotas_with(quotas, clock, **settings).home)


def proxy_quotas_with(quotas, clock, **settings) -> ProxyQuotas:
    config = parse_config(
        {
            "upstream": {"bootstrap_servers": ["b:1"]},
            "listeners": [{"name": "L", "bind": "h:2"}],
            "quotas": quotas,
            "settings": settings,
        }
    )
    return ProxyQuotas(config, clock)
