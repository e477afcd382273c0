"""The in-flight bound's cost to a pipelining producer: confluent-kafka (1 KiB messages, linger 5 ms, acks=all, as
``bench/passthrough.py``) through proxies with ``connections.max.inflight.requests`` 5 and 200, each round against a
direct Tansu beside it. Prints, per round, proxied / direct (the mean of a direct run before and after) and how often
the bound was reached; then the median per bound. Usage: ``python bench/inflight_bound.py [--rounds 4]
[--messages 60000]``."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import direct_and_proxied  # noqa: E402
from bench.passthrough import create_topic, produce  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--messages", type=int, default=60000)
    args = parser.parse_args()
    ratios: dict[int, list[float]] = {}
    for rnd in range(args.rounds):
        for bound in (5, 200):
            with direct_and_proxied(f"settings: {{connections.max.inflight.requests: {bound}}}\n") as (
                direct,
                proxied,
                metrics,
            ):
                topic = f"inflight-{bound}-{rnd}"
                create_topic(proxied, topic)
                create_topic(direct, topic)
                before = produce(direct, topic, args.messages)
                through = produce(proxied, topic, args.messages)
                after = produce(direct, topic, args.messages)
                text = urllib.request.urlopen(metrics, timeout=10).read().decode()
                reached = sum(
                    float(line.rsplit(" ", 1)[1])
                    for line in text.splitlines()
                    if line.startswith("kafka_quota_proxy_connection_inflight_bound_reached_total")
                )
                ratio = through / ((before + after) / 2)
                ratios.setdefault(bound, []).append(ratio)
                print(
                    f"round {rnd} bound {bound:3}: {ratio:.3f} x direct, bound reached {reached:.0f} times", flush=True
                )
    for bound, values in ratios.items():
        print(
            f"bound {bound:3}: median {statistics.median(values):.3f} x direct "
            f"(rounds {' '.join(f'{v:.2f}' for v in values)})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
