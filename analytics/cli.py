"""``kafka-quota-proxy analyze``: run the quota planner on a usage log.

    kafka-quota-proxy analyze --input /var/log/kafka-quota-proxy/usage --output ./plan [--master URL] [--headroom X]
                              [--scope broker|cluster]

Also ``python -m analytics.cli analyze ...``, or on a cluster ``spark-submit analytics/cli.py analyze ...`` (then
spark-submit's ``--master`` applies). pyspark is imported only when the job runs.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from analytics.recommend import Rules


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--input",
        required=True,
        metavar="PATH",
        help="usage log: a directory of *.jsonl / *.jsonl.gz files, or one such file (any Hadoop path)",
    )
    p.add_argument("--output", required=True, metavar="DIR", help="where the tables, YAML, commands and report go")
    p.add_argument("--master", metavar="URL", help="Spark master (default local[*], or spark-submit's)")
    p.add_argument(
        "--headroom", type=float, default=Rules.headroom, help="recommended = p99 rate x this (default %(default)s)"
    )
    p.add_argument(
        "--burst",
        choices=("max", "p99"),
        default=Rules.burst,
        help="one-interval burst the token buckets must hold (default %(default)s)",
    )
    p.add_argument(
        "--max-raise",
        type=float,
        default=Rules.max_raise,
        help="a tenant held by its quota is recommended at most this x the quota in force (default %(default)s)",
    )
    p.add_argument(
        "--quota-window-num",
        type=int,
        default=Rules.quota_window_num,
        help="quota.window.num of the proxy: byte rates are measured over its sampled window (default %(default)s)",
    )
    p.add_argument(
        "--quota-window-s",
        type=int,
        default=Rules.quota_window_s,
        help="quota.window.size.seconds (default %(default)s)",
    )
    p.add_argument(
        "--replay",
        nargs="?",
        const="recommended",
        metavar="QUOTAS.yaml",
        help="replay the logged demand through the proxy's byte-rate quota under today's quotas and this "
        "table (a proxy configuration or a quotas: block); without a file, the recommended table",
    )
    p.add_argument(
        "--controller-window-num",
        type=int,
        default=Rules.controller_window_num,
        help="controller.quota.window.num of the proxy (default %(default)s)",
    )
    p.add_argument(
        "--controller-window-s",
        type=float,
        default=Rules.controller_window_s,
        help="controller.quota.window.size.seconds (default %(default)s)",
    )
    p.add_argument(
        "--producer-id-window-num",
        type=int,
        default=Rules.producer_id_window_num,
        help="producer.id.quota.window.num (default %(default)s)",
    )
    p.add_argument(
        "--producer-id-window-s",
        type=float,
        default=Rules.producer_id_window_s,
        help="producer.id.quota.window.size.seconds: producer_ids_rate is per this (default %(default)s)",
    )
    p.add_argument(
        "--scope",
        choices=("broker", "cluster"),
        help="the proxies' quota.scope the recommendations are for: broker (per broker, the busiest "
        "broker's rate) or cluster (the total over every broker); default: the scope the log records, "
        "broker if it records none",
    )
    p.add_argument(
        "--local-output",
        metavar="DIR",
        help="where the driver writes the small files when --output is not a local path",
    )
    p.add_argument("--no-charts", action="store_true", help="skip the PNG charts")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafka-quota-proxy", description="Kafka quota proxy analytics")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_arguments(
        sub.add_parser(
            "analyze",
            help="recommend quotas from the proxy's usage log (PySpark)",
            description=__doc__.split("\n\n")[0],
        )
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return analyze(args)


def analyze(args: argparse.Namespace) -> int:
    try:
        rules = Rules(
            headroom=args.headroom,
            burst=args.burst,
            max_raise=args.max_raise,
            quota_window_num=args.quota_window_num,
            quota_window_s=args.quota_window_s,
            controller_window_num=args.controller_window_num,
            controller_window_s=args.controller_window_s,
            producer_id_window_num=args.producer_id_window_num,
            producer_id_window_s=args.producer_id_window_s,
        )
    except ValueError as exc:
        print(f"kafka-quota-proxy analyze: {exc}", file=sys.stderr)
        return 2
    try:
        from analytics import job
    except ImportError as exc:
        print(
            f"kafka-quota-proxy analyze: needs pyspark ({exc}); install the analytics extra: pip install "
            "'.[analytics]' in a checkout, or the wheel with [analytics]",
            file=sys.stderr,
        )
        return 1
    from pyspark.errors import AnalysisException

    from analytics.replay import ReplayError
    from analytics.scope import ScopeError

    try:
        with sigterm_cleans_up():
            result = job.run(
                args.input,
                args.output,
                args.master,
                rules=rules,
                local_dir=args.local_output,
                charts=not args.no_charts,
                scope=args.scope,
                replay=args.replay,
            )
    except AnalysisException as exc:  # e.g. no such input path: one line, not a JVM stack trace
        print(f"kafka-quota-proxy analyze: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    except (ScopeError, ReplayError) as exc:  # a log mixing quota.scope broker and cluster; a bad --replay table
        print(f"kafka-quota-proxy analyze: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C: PySpark cancels the jobs; the session is stopped and the code zip removed
        print("kafka-quota-proxy analyze: interrupted", file=sys.stderr)
        return 130
    for line in job.summary_lines(result):
        print(line)
    return 0


@contextmanager
def sigterm_cleans_up() -> Iterator[None]:
    """SIGTERM (``kill``, a scheduler stopping the job) removes the code zip given to the executors
    (:func:`analytics.shipping.remove_all`), then ends the process as SIGTERM does; Spark's JVM, whose standard input
    closes with us, stops and removes its own files. (Raised as an exception instead, it would land inside a py4j
    call, leave the gateway out of step, and stopping the session would then fail.) Only in the main thread, where
    Python runs signal handlers; the previous handler is back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _terminate(signum: int, frame) -> None:
    from analytics import shipping

    shipping.remove_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


if __name__ == "__main__":
    sys.exit(main())
