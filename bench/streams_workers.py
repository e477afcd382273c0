"""Kafka Streams internal topics charged once through two workers (issue 44): several first instances of a KIP-1071
Streams application join at the same moment through a sidecar with ``workers: 2``, each on connections of its own
(SO_REUSEPORT spreads them over the workers), and the coordinator creates the store's changelog topic (3 partitions:
the source topic's). Prints the partitions each worker charged (``controller_mutations_total``, summed); once per
application is ``3 x --rounds``.

One Apache Kafka 4.4 node from the jars (tests/kafka_cluster.py), the proxy's command line in front of it.

Usage: ``python bench/streams_workers.py [--rounds 3] [--members 8]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, free_port, wait_for_port  # noqa: E402
from proxy.codec.apis import STREAMS_GROUP_HEARTBEAT  # noqa: E402
from tests.harness import wait_until  # noqa: E402
from tests.integration.kafka.quotas_common import direct_admin  # noqa: E402
from tests.integration.raw import heartbeat_until_answered, streams_join  # noqa: E402
from tests.integration.workers import ready, samples, scrape  # noqa: E402
from tests.kafka_cluster import KafkaCluster  # noqa: E402

SOURCE, PARTITIONS = "streams-workers-source", 3
SETTLE_S = 15  # the created counts looked up, the workers' claims answered, their metrics synced


def join_at_once(port: int, group: str, members: int) -> list[int]:
    """``members`` first instances of ``group`` joining at the same moment; their answers' error codes."""
    barrier, codes = threading.Barrier(members), []
    compacted = [{"key": "cleanup.policy", "value": "compact"}]

    def join() -> None:
        fields = streams_join(group, str(uuid.uuid4()), SOURCE, compacted)
        barrier.wait()
        codes.append(heartbeat_until_answered(port, STREAMS_GROUP_HEARTBEAT, 1, **fields).error_code)

    threads = [threading.Thread(target=join) for _ in range(members)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return codes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="applications, one after the other")
    parser.add_argument("--members", type=int, default=8, help="first instances of each joining at once")
    args = parser.parse_args()
    cluster = KafkaCluster(1, "streams-workers").start()
    proxy = None
    try:
        from kafka.admin import NewTopic

        admin = direct_admin(cluster)
        admin.create_topics([NewTopic(SOURCE, PARTITIONS, 1)])
        admin.close()
        node, metrics_port = cluster.nodes[0], free_port()
        quotas = [{"entity": {"client-id": "raw-test"}, "controller_mutation_rate": 100}]
        raw = cluster.sidecar_config(node, quotas, workers=2)
        raw["metrics"]["bind"] = f"127.0.0.1:{metrics_port}"
        raw["dynamic_config"] = {"enabled": False}
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write(json.dumps(raw))  # JSON is YAML
        proxy = subprocess.Popen(
            [sys.executable, "-m", "proxy.cli", "run", "--config", f.name, "--log-level", "WARNING"], cwd=ROOT
        )
        wait_for_port(metrics_port, 60)
        wait_until(lambda: ready(metrics_port), 60, "the proxy's parent says ready")
        for n in range(args.rounds):
            codes = join_at_once(node.proxy_port, f"streams-workers-{uuid.uuid4().hex[:8]}", args.members)
            print(f"application {n + 1}: {args.members} first instances joined, answers {sorted(set(codes))}")
        time.sleep(SETTLE_S)
        charged = samples(scrape(metrics_port), "kafka_quota_proxy_controller_mutations_total", client_id="raw-test")
        print(
            f"partitions charged by worker: {dict(sorted(charged.items()))}, in all {sum(charged.values()):g} "
            f"(once per application: {PARTITIONS * args.rounds})"
        )
        os.unlink(f.name)
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait(30)
        cluster.stop()


if __name__ == "__main__":
    main()
