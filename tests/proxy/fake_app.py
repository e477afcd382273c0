"""What a worker link reads of its ProxyApp, for the worker link, seed and cluster relay tests."""

from __future__ import annotations

from config.loader import parse_config
from proxy.cluster.creation_claims import CreationClaims
from proxy.connection.open_gate import OpenGate
from proxy.enforcement.proxy_quotas import ProxyQuotas
from proxy.ops.metrics import ProxyMetrics
from quota.managers.connection import ConnectionQuotas

CONFIG = {
    "upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
    "listeners": [
        {"name": "PLAINTEXT", "bind": "127.0.0.1:0", "broker_port_base": 40000, "advertised_host": "127.0.0.1"}
    ],
    "settings": {"quota.scope": "broker", "workers": 2},
    "quotas": [{"entity": {"client-id": "spread"}, "producer_byte_rate": 1000}],
}


class FakeApp:
    """What a link reads of its ProxyApp."""

    def __init__(self, clock, raw=CONFIG) -> None:
        config = parse_config(raw)
        self.quotas = ProxyQuotas(config, clock)
        self.connection_quotas = ConnectionQuotas(["PLAINTEXT"], self.quotas.window)
        self.open_gate = OpenGate()
        self.creation_claims = CreationClaims()
        self.metrics = ProxyMetrics()
        self.ops_address = None
        self.config = config

    def not_ready(self):
        return None
