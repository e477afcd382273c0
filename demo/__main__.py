"""``python -m demo`` (``make demo``): say what the demo will show, run it (:func:`demo.run.run_scenario`), print the
verdicts; on a failure, Ctrl-C or SIGTERM say plainly what happened, after everything the demo started has stopped.

Exit code: 0 when every client was judged and passed every time, 1 on a failure or a verdict short of that,
128 + the signal's number when a signal stopped the demo before its steady traffic (130 for Ctrl-C, 143 for
SIGTERM).
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from config.errors import ConfigError
from config.loader import load_config_file
from demo.processes import DemoError
from demo.restarts import RESTARTS
from demo.run import DEFAULT_SECONDS, TOPIC, USER, Interrupted, Stop, run_scenario
from demo.smoothing import SMOOTH
from demo.storms import ADMIN, CALM_IP, CONNECT_PER_S, CONNECT_SECONDS, STORM_IP, STORM_PARTITIONS, STORM_SECONDS
from demo.verdicts import LIMITED, MEASURED_SPANS, UNLIMITED, UNLIMITED_OFFER, MiB, bounds_text, timing

DEMO_CONFIG = Path(__file__).with_name("demo.yaml")


def banner(config_path: str, seconds: float) -> None:
    config = load_config_file(config_path)
    burst_s, window_s = timing(config)
    smooth = config.quotas.limit("producer_byte_rate", USER, SMOOTH)
    limits = " / ".join(
        f"{config.quotas.limit(f'{role}_byte_rate', USER, LIMITED) / MiB:.2f} MiB/s {role}_byte_rate"
        for role in ("producer", "consumer")
    )
    print(
        "\n".join(
            [
                "kafka-quota-proxy demo: byte-rate quotas on confluent-kafka clients (default settings, 1 KiB messages)",
                f"  broker   Tansu (in memory) on {config.upstream.bootstrap_servers[0]}, advertising the proxy",
                f"  proxy    kafka-quota-proxy run --config {config_path}",
                f"           clients connect to {config.listeners[0].bind}; metrics on http://{config.metrics.bind}/metrics",
                f"  clients  {LIMITED} producer and consumer, under {limits}",
                f"           {UNLIMITED} producer, no quota, offering {UNLIMITED_OFFER / MiB:.0f} MiB/s",
                f"           {UNLIMITED} consumer, no quota, reading all of topic '{TOPIC}'",
                f"  first    a connection storm: {CONNECT_PER_S} connections/s for {CONNECT_SECONDS} s from {STORM_IP}, under "
                f"{config.connections.ip_rate(STORM_IP):g}/s",
                f"           connection_creation_rate (KIP-612), and the same from {CALM_IP}, which has no quota",
                f"  then     a topic-creation storm: {ADMIN} (kafka-python admin) creates {STORM_PARTITIONS}-partition topics",
                f"           for {STORM_SECONDS} s under {config.quotas.limit('controller_mutation_rate', USER, ADMIN):g} "
                "partitions/s controller_mutation_rate (KIP-599)",
                f"  then     a producer-restart loop: {RESTARTS} kafka-python idempotent producers, one after another,",
                f"           under {config.quotas.limit('producer_ids_rate', USER, ''):g} new producer ids per "
                f"{config.settings.producer_id_quota_window_size_seconds} s window per user (producer_ids_rate, KIP-936)",
                "  then     a disk filling up: the demo publishes a simulated broker volume crossing the soft and the hard",
                "           limit (volume_usage) while a producer writes 2 MiB/s through the proxy",
                f"  then     smoothing: a producer flat out under {smooth / MiB:g} MiB/s producer_byte_rate with "
                "quota.smoothing off",
                "           (Kafka's stop-and-go), then on (set dynamically): its rate each second, side by side",
                "  last     the quota planner (PySpark) on the proxy's usage log of this run, with synthetic misbehaving",
                "           tenants beside it: recommended quotas, top offenders, an HTML report",
                "Each second, one line per client: its rate in the last second (throttled clients run in bursts, as",
                f"against Kafka); once the {burst_s} s start-up burst is over, its rate over a window sliding to {window_s} s",
                f"({MEASURED_SPANS} quota window spans), from the clients' own counts; and a verdict: limited clients",
                f"{bounds_text(LIMITED)} x quota, the unlimited producer {bounds_text(UNLIMITED + ' producer')} x what it "
                f"offers, the unlimited consumer {bounds_text(UNLIMITED + ' consumer')} x",
                f"what both producers write. First verdict at {burst_s + window_s} s; "
                + (f"runs {seconds:.0f} s (Ctrl-C stops it earlier)." if seconds else "runs until Ctrl-C."),
                "",
            ]
        ),
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m demo",
        description="make demo: Tansu, the proxy in front of it, and clients showing each quota at work",
    )
    try:
        default_config = str(DEMO_CONFIG.relative_to(Path.cwd()))
    except ValueError:
        default_config = str(DEMO_CONFIG)
    parser.add_argument("--config", default=default_config, help="the proxy's configuration (default %(default)s)")
    parser.add_argument(
        "--seconds",
        type=float,
        default=DEFAULT_SECONDS,
        help=f"stop after this long (default {DEFAULT_SECONDS}; 0: until Ctrl-C)",
    )
    args = parser.parse_args(argv)
    stop = Stop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    try:
        banner(args.config, args.seconds)
        verdicts = run_scenario(args.config, args.seconds, lambda line: print(line, flush=True), stop)
    except Interrupted as exc:
        what = "Ctrl-C (SIGINT)" if exc.signal_name == "SIGINT" else exc.signal_name
        print(
            f"\nstopped by {what}"
            + (f" during {exc.during}" if exc.during else "")
            + "; everything the demo started has been stopped\nverdict: NONE",
            flush=True,
        )
        return 128 + signal.Signals[exc.signal_name].value if exc.signal_name in signal.Signals.__members__ else 1
    except (DemoError, ConfigError, OSError) as exc:
        print(f"\n{exc}\nverdict: FAIL", flush=True)
        return 1
    print("\nsummary:\n" + "\n".join("  " + v.text() for v in verdicts))
    failed = [v.client for v in verdicts if v.ok is False]
    burst_s, window_s = timing(load_config_file(args.config))
    if failed:
        print("verdict: FAIL: " + ", ".join(failed))
    elif any(v.ok is None for v in verdicts):
        print(f"verdict: NONE, stopped before the first verdict at {burst_s + window_s} s")
    else:
        print("verdict: PASS, every client as expected")
    return 0 if all(v.ok for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
