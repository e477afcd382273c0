"""`make demo`'s scenario, run for a short time against Tansu: every verdict it prints must pass.

The same clients and quotas as config/demo.yaml (confluent-kafka with default settings, a producer and a consumer
under 1 MiB/s, an unlimited producer offering 4 MiB/s), on free ports and with 3 x 1 s quota windows so the
start-up burst is over quickly.
"""

import asyncio
from importlib import resources

import pytest
import yaml

from config.loader import parse_config
from proxy.demo import run_scenario
from tests.harness import Tansu, free_port

pytestmark = pytest.mark.integration


def test_demo_scenario_verdicts_pass():
    raw = yaml.safe_load((resources.files("config") / "demo.yaml").read_text())
    proxy_port, broker_port = free_port(), free_port()
    raw["upstream"]["bootstrap_servers"] = [f"127.0.0.1:{broker_port}"]
    raw["listeners"][0]["bind"] = f"127.0.0.1:{proxy_port}"
    raw["metrics"]["bind"] = "127.0.0.1:0"
    raw["settings"]["quota.window.num"] = 3
    config = parse_config(raw)
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    lines = []
    try:
        verdicts = asyncio.run(run_scenario(config, 24, report=lines.append))
    finally:
        broker.stop()
    assert verdicts and all(v.ok is not None for v in verdicts), lines[-1:]
    assert all(v.ok for v in verdicts), "\n".join(lines[-3:])
    assert all(line.rstrip().endswith(("OK", "FAIL", "burst")) for text in lines for line in text.splitlines()[1:])
