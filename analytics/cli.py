"""``kafka-quota-proxy analyze``: run the quota planner on a usage log.

    kafka-quota-proxy analyze --input /var/log/kafka-quota-proxy/usage --output ./plan [--master URL] [--headroom X]
                              [--scope broker|cluster] [--proxy-config /etc/kafka-quota-proxy/proxy.yaml] [--replay]

The proxy's window settings come from ``--proxy-config`` (its ``settings:`` section), a window flag winning over
it; the steps and Spark's work are said on standard error as the job runs (:mod:`analytics.progress`).

Also ``python -m analytics.cli analyze ...``, or on a cluster ``spark-submit analytics/cli.py analyze ...`` (then
spark-submit's ``--master`` applies). pyspark is imported only when the job runs.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from analytics.capacity import parse_capacity
from analytics.fleet import DEFAULT_PERCENTILE
from analytics.in_force import InForce, describe, from_file, window_sources, with_described
from analytics.outliers import parse_entity
from analytics.recommend import WINDOWS, Rules
from config.settings_table import SETTINGS


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
        "--replay",
        nargs="?",
        const="recommended",
        metavar="QUOTAS.yaml",
        help="replay the logged demand through the proxy's byte-rate quota under today's quotas and this "
        "table (a proxy configuration or a quotas: block); without a file, the recommended table",
    )
    p.add_argument(
        "--proxy-config",
        metavar="FILE",
        help="the proxy's configuration: the window settings below are read from its settings: section (the "
        "proxy's defaults for those it leaves out; a window flag given here wins), and its quotas: are the table in "
        "force the change set is against",
    )
    p.add_argument(
        "--bootstrap",
        metavar="HOST:PORT",
        help="a running proxy (with a dynamic config): the table in force is what it answers to DescribeClientQuotas "
        "(its configuration with the config topic's entries over it)",
    )
    p.add_argument(
        "--capacity",
        type=_capacity,
        metavar="NAME=N,...",
        help="the brokers' capacity: bytes_in and bytes_out (B/s; one broker's under quota.scope broker, the "
        "cluster's under cluster), partitions (partition mutations/s), connections (new connections/s): the output "
        "says how much of each the table commits at once (the limits of the tenants active together in the log's "
        "busiest interval) and flags an oversubscribed one",
    )
    p.add_argument(
        "--capacity-fit",
        choices=("flag", "scale"),
        default="flag",
        help="an oversubscribed capacity: flagged only (default), or every limit of its key scaled down to fit",
    )
    p.add_argument(
        "--command-config", metavar="FILE", help="Kafka client properties for --bootstrap (as kafka-configs takes them)"
    )
    for flag, (name, what) in WINDOW_FLAGS.items():
        setting = WINDOWS[name]
        p.add_argument(
            flag,
            type=_whole(setting),
            metavar="N" if flag.endswith("num") else "S",
            help=f"{setting} of the proxy{what} (default: --proxy-config's, else {getattr(Rules, name)})",
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
    p.add_argument("--no-charts", action="store_true", help="skip the SVG charts")
    p.add_argument("--quiet", action="store_true", help="no progress lines on standard error")
    fleet = p.add_mutually_exclusive_group()
    fleet.add_argument(
        "--fleet-default",
        nargs="?",
        type=_percentile,
        const=DEFAULT_PERCENTILE,
        default=DEFAULT_PERCENTILE,
        metavar="PERCENTILE",
        help="the table is a <default> entry per entity type and quota key at this percentile of the tenants' "
        "recommendations, offenders left out (IPs at p99 or this, the higher), and named entries only for the tenants "
        "above it and the offenders; the default, at %(default)s",
    )
    fleet.add_argument(
        "--no-fleet-default",
        dest="fleet_default",
        action="store_const",
        const=None,
        default=argparse.SUPPRESS,
        help="one entry per tenant and IP seen, no <default> entries (offenders are held all the same)",
    )
    p.add_argument(
        "--offender-mads",
        type=float,
        default=Rules.offender_mads,
        metavar="K",
        help="a tenant whose figure is more than K MADs above its fleet's median (log scale) is an offender, held to "
        "the fleet's figure (default %(default)s)",
    )
    p.add_argument(
        "--legitimate",
        action="append",
        default=[],
        type=_entity,
        metavar="ENTITY",
        help="keep this tenant's own figure where its heavy use is legitimate, though far from its fleet (else it is "
        "named an offender and held to the fleet's figure): users=NAME, clients=NAME, users=NAME,clients=NAME, "
        "ips=ADDRESS, topics=NAME, groups=NAME or quota-groups=NAME, the entity types of the commands file; repeatable",
    )


# The window flags: flag -> (Rules field, what it does); the proxy's setting of each is recommend.WINDOWS[field].
WINDOW_FLAGS = {
    "--quota-window-num": ("quota_window_num", ": byte rates are measured over its sampled window"),
    "--quota-window-s": ("quota_window_s", ", seconds"),
    "--controller-window-num": ("controller_window_num", ""),
    "--controller-window-s": ("controller_window_s", ", seconds"),
    "--producer-id-window-num": ("producer_id_window_num", ""),
    "--producer-id-window-s": ("producer_id_window_s", ", seconds: producer_ids_rate is per this"),
}


def _whole(setting: str) -> Callable[[str], int]:
    """The flag's value as the proxy takes ``setting``: a whole number within the proxy's bounds (``2`` or ``2.0``)."""
    bounds = SETTINGS[setting]

    def parse(text: str) -> int:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (value.is_integer() and bounds.minimum <= value <= bounds.maximum):
            raise argparse.ArgumentTypeError(
                f"{setting} is a whole number from {bounds.minimum:g} to {bounds.maximum:g} in the proxy, got {text!r}"
            )
        return int(value)

    return parse


def _percentile(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= 100:
        raise argparse.ArgumentTypeError(f"a percentile above 0 and at most 100, got {text!r}")
    return value


def _capacity(text: str) -> dict[str, float]:
    try:
        return parse_capacity(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _entity(text: str) -> dict[str, str]:
    try:
        return parse_entity(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def windows(args: argparse.Namespace) -> tuple[dict, dict[str, str], tuple[dict, ...] | None]:
    """Rules' window fields (and the APIs request_rate counts, from the file): each flag given, else the proxy's
    setting from ``--proxy-config`` (its default when the file leaves it out), else Rules' own default (the proxy's
    defaults too); where each came from
    (:func:`analytics.in_force.window_sources`); and the file's quota items (None without a file). Raises
    ConfigError for a bad file, naming every key at fault."""
    found: dict = {}
    items = None
    file_keys: list[str] = []
    if args.proxy_config:
        from config.loader import load_settings_and_quotas
        from config.typed_settings import attribute

        settings, items = load_settings_and_quotas(args.proxy_config)
        if settings.quota_mode == "shadow":  # every quota of the proxy in shadow mode, connection limits aside
            items = tuple(it if "ip" in it["entity"] else {**it, "mode": "shadow"} for it in items)
        found = {name: getattr(settings, attribute(setting)) for name, setting in WINDOWS.items()}
        found["request_rate_apis"] = settings.quota_request_rate_apis  # what request_rate counts there
        file_keys = _settings_keys(args.proxy_config)
    given = {name: flag for flag, (name, _) in WINDOW_FLAGS.items() if getattr(args, name) is not None}
    for name in given:
        found[name] = getattr(args, name)
    return found, window_sources(given, args.proxy_config, file_keys), items


def _settings_keys(path: str) -> list[str]:
    """The keys the file's ``settings:`` section sets (the file was checked already)."""
    import yaml

    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    section = doc.get("settings") if isinstance(doc, dict) else None
    return list(section) if isinstance(section, dict) else []


def in_force(args: argparse.Namespace, items: tuple[dict, ...] | None) -> InForce | None:
    """The table in force: the proxy's answer with ``--bootstrap``, else the file's ``quotas:``, else None (no
    change set). Raises :class:`proxy.cli.quota_admin.Failed` when the proxy cannot be asked."""
    file = from_file(args.proxy_config, items) if items is not None else None
    if not args.bootstrap:
        return file
    from proxy.cli.command_config import CommandConfigError, read_command_config
    from proxy.cli.quota_admin import Failed

    try:
        security = read_command_config(args.command_config) if args.command_config else {}
    except CommandConfigError as exc:
        raise Failed(f"--command-config {args.command_config}: {exc}") from None
    return with_described(file, describe(args.bootstrap, security), args.bootstrap)


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
    from config.errors import ConfigError
    from proxy.cli.quota_admin import Failed

    if args.capacity_fit == "scale" and not args.capacity:
        print("kafka-quota-proxy analyze: --capacity-fit scale needs --capacity", file=sys.stderr)
        return 2
    try:
        found, sources, items = windows(args)
        rules = Rules(
            headroom=args.headroom,
            burst=args.burst,
            max_raise=args.max_raise,
            offender_mads=args.offender_mads,
            **found,
        )
        table_in_force = in_force(args, items)
    except ConfigError as exc:
        print(f"kafka-quota-proxy analyze: --proxy-config {args.proxy_config}: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"kafka-quota-proxy analyze: {exc}", file=sys.stderr)
        return 2
    except Failed as exc:
        print(f"kafka-quota-proxy analyze: --bootstrap {args.bootstrap}: {exc}", file=sys.stderr)
        return 1
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
    from analytics.report import summary_lines
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
                progress=None if args.quiet else sys.stderr,
                fleet_default=args.fleet_default,
                legitimate=args.legitimate,
                sources=sources,
                in_force=table_in_force,
                capacity=args.capacity,
                capacity_fit=args.capacity_fit,
                console_progress=not args.quiet and sys.stderr.isatty(),
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
    finally:
        from analytics import shipping

        shipping.jvm_gone()  # its temporary files go with it, before the command returns
    for line in summary_lines(result):
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
