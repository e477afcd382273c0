"""Kroxylicious, the open-source Kafka proxy, as its own JVM in front of a Kafka cluster: the peer the proxy's cost
per byte and per request is measured beside (bench/anchors_kroxylicious.py).

Fetched and compiled by tools/fetch_kroxylicious.py (the runtime from Maven Central, a small main). It runs as
Kroxylicious's own start script runs it outside a container: the JVM's defaults plus ``-XX:+ExitOnOutOfMemoryError``,
no filters, no management endpoint, warnings logged to ``kroxylicious.log`` in ``directory``. One virtual cluster
whose ``targetCluster`` is ``upstream`` (a listener advertising the brokers' own addresses), behind a
``portIdentifiesNode`` gateway: clients bootstrap on ``port`` and reach the broker with node id N on
``port + 1 + N`` (node ids 0 to ``max_node_id``), every address in the answers rewritten to those ports.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import fetch_kroxylicious  # noqa: E402  (tools/ is not a package: the set-up script, runnable on its own)

from bench.anchors_common import stop_process  # noqa: E402
from bench.common import wait_for_port  # noqa: E402

JVM_OPTIONS = ("-XX:+ExitOnOutOfMemoryError", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")


@dataclass
class KroxyliciousProcess:
    port: int
    upstream: str
    directory: Path
    max_node_id: int = 2
    proc: subprocess.Popen | None = None

    def config(self) -> dict:
        gateway = {
            "bootstrapAddress": f"127.0.0.1:{self.port}",
            "nodeIdRanges": [{"name": "brokers", "start": 0, "end": self.max_node_id}],
        }
        cluster = {
            "name": "bench",
            "targetCluster": {"bootstrapServers": self.upstream},
            "gateways": [{"name": "plain", "portIdentifiesNode": gateway}],
        }
        return {"virtualClusters": [cluster]}

    def start(self) -> KroxyliciousProcess:
        fetch_kroxylicious.fetch()
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / "kroxylicious.yaml"
        path.write_text(json.dumps(self.config(), indent=2))  # JSON is YAML
        with open(self.directory / "kroxylicious.log", "ab") as log:
            self.proc = subprocess.Popen(
                fetch_kroxylicious.command(path, jvm_options=JVM_OPTIONS),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        try:
            wait_for_port(self.port, 60)
        except TimeoutError:
            self.stop()
            raise RuntimeError(f"Kroxylicious did not listen on {self.port}:\n{self.log_tail()}") from None
        return self

    def log_tail(self, lines: int = 20) -> str:
        path = self.directory / "kroxylicious.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def stop(self) -> None:
        stop_process(self.proc)
