"""The reference tables of the README and docs/ against the code, both ways, so they cannot drift apart.

- Configuration: every key the loader accepts (``settings:`` from config/settings_table.py; every other section's
  keys as the loader itself lists them in its "unknown key (known keys: ...)" error) has a row in the README's
  ``| key | meaning |`` table, every row names a key the loader accepts, and a row's stated default is the code's.
- Metrics: every Prometheus family registered under proxy/ (prometheus_client Counter/Gauge/Histogram and the
  collectors' *MetricFamily, found in the source) has a row in the README's ``| metric | type | labels |`` table
  with its type and labels, and every row names a family that exists.
- Command lines: every ``kafka-quota-proxy`` subcommand and option the README shows exists in the argparse parser,
  and every ``make`` target it names is in the Makefile.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
from collections.abc import Mapping

import pytest

from config import dynamic_source
from config import settings as settings_module
from config.errors import ConfigError
from config.loader import parse_config
from config.settings_table import LISTENER_SETTINGS
from config.tls import parse_listener_tls, parse_upstream_tls
from config.usage import UsageLogConfig, parse_usage_log
from config.volume import VolumeUsageConfig, parse_volume_usage

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pages() -> list[str]:
    """README.md, then every reference page under docs/ (the reference the README leads to)."""
    paths = [os.path.join(ROOT, "README.md")]
    for folder, _, files in sorted(os.walk(os.path.join(ROOT, "docs"))):
        paths += [os.path.join(folder, name) for name in sorted(files) if name.endswith(".md")]
    return paths


PAGES = _pages()
README = "\n".join(open(path, encoding="utf-8").read() for path in PAGES)  # the guide and its reference, as one text

UNLIMITED = 2**31 - 1
TICKED = re.compile(r"`([^`]+)`")


def table(header: str) -> list[list[str]]:
    """The rows (cells stripped) of the README table whose header line starts with ``header``."""
    lines = README.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
    return rows


def row_names(cell: str) -> list[str]:
    """The names a first cell gives: "`a.b.c`, `.d`" is a.b.c and a.b.d."""
    names = []
    for name in TICKED.findall(cell):
        if name.startswith(".") and names:
            name = names[-1].rsplit(".", 1)[0] + name
        names.append(name)
    return names


# --- configuration -------------------------------------------------------------------------------------------------


def known_keys(probe) -> set[str]:
    """The keys a loader function accepts, as its error for an unknown key lists them."""
    with pytest.raises(ConfigError) as caught:
        probe()
    match = re.search(r"known keys: ([^)]*)\)", caught.value.reason)
    assert match, caught.value.reason
    return {key.strip() for key in match.group(1).split(",")}


LISTENER = {"name": "L", "bind": "127.0.0.1:1"}


def accepted_keys() -> set[str]:
    """Every key path the loader accepts (sections whose keys have their own rows are not keys themselves)."""
    top = known_keys(lambda: parse_config({"zzz": 1}))
    upstream = known_keys(lambda: parse_config({"upstream": {"zzz": 1}, "listeners": [LISTENER]}))
    listener = known_keys(
        lambda: parse_config({"upstream": {"bootstrap_servers": ["a:1"]}, "listeners": [{**LISTENER, "zzz": 1}]})
    )
    metrics = known_keys(
        lambda: parse_config(
            {"upstream": {"bootstrap_servers": ["a:1"]}, "listeners": [LISTENER], "metrics": {"zzz": 1}}
        )
    )
    listener_tls = known_keys(lambda: parse_listener_tls({"zzz": 1}, "t"))
    upstream_tls = known_keys(lambda: parse_upstream_tls({"zzz": 1}, "t"))
    volume = known_keys(lambda: parse_volume_usage({"zzz": 1}, "v"))
    publisher = known_keys(lambda: parse_volume_usage({"publisher": {"zzz": 1}}, "v"))
    log_dirs = known_keys(
        lambda: parse_volume_usage({"source": "describe_log_dirs", "describe_log_dirs": {"zzz": 1}}, "v")
    )
    usage = known_keys(lambda: parse_usage_log({"dir": "d", "zzz": 1}, "u"))
    keys = {
        key
        for key in top
        if key
        not in {"upstream", "listeners", "metrics", "settings", "quotas", "volume_usage", "usage_log", "dynamic_config"}
    }
    keys |= {f"upstream.{k}" for k in upstream if k != "tls"} | {f"upstream.tls.{k}" for k in upstream_tls}
    keys |= {f"listeners[].{k}" for k in listener if k != "tls"} | {f"listeners[].tls.{k}" for k in listener_tls}
    keys |= {f"metrics.{k}" for k in metrics}
    keys |= {f"volume_usage.{k}" for k in volume if k not in ("publisher", "describe_log_dirs")}
    keys |= {f"volume_usage.publisher.{k}" for k in publisher}
    keys |= {f"volume_usage.describe_log_dirs.{k}" for k in log_dirs}
    keys |= {f"usage_log.{k}" for k in usage} | {f"dynamic_config.{k}" for k in dynamic_source.KEYS}
    keys |= {
        f"quotas[].{k}"
        for k in (
            "entity",
            "mode",
            "connection_creation_rate",
            *__import__("config.quotas", fromlist=["x"]).ENFORCED_KEYS,
            __import__("config.topic_quotas", fromlist=["x"]).ON_EXCEED,
            *__import__("quota.primitives.quota_groups", fromlist=["x"]).MEMBER_KEYS,
        )
    }
    keys |= {f"settings.{k}" for k in settings_names()}
    keys |= {f"settings.listener.name.<name>.{k}" for k in LISTENER_SETTINGS}
    return keys


def settings_names() -> set[str]:
    """Every ``settings:`` key parse_settings accepts besides the per-listener ones (too many to list in its
    unknown-key error, which suggests the closest instead)."""
    return set(settings_module.SETTING_KEYS)


def readme_keys() -> dict[str, str]:
    """Key -> the meaning cell of its row, from the configuration table."""
    rows = {}
    for cells in table("| key | meaning |"):
        for name in row_names(cells[0]):
            assert name not in rows, f"README configuration table: {name} has two rows"
            rows[name] = cells[1]
    return rows


def documented(key: str, rows: dict[str, str]) -> bool:
    """A key has its own row, or its section's row names it (`upstream.tls` names `cafile`, `verify`, ...)."""
    if key in rows:
        return True
    parent, _, leaf = key.rpartition(".")
    return (
        parent in rows
        and f"`{leaf}`" in rows[parent]
        or parent in rows
        and re.search(rf"`{re.escape(leaf)}`|`{re.escape(leaf)}/|/{re.escape(leaf)}`", rows[parent]) is not None
    )


def test_every_accepted_key_has_a_readme_row():
    rows = readme_keys()
    missing = sorted(key for key in accepted_keys() if not documented(key, rows))
    assert not missing, f"keys the loader accepts with no row in README's configuration table: {missing}"


def test_every_readme_row_names_an_accepted_key():
    accepted = accepted_keys() | {"upstream.tls", "listeners[].tls"}  # rows for the sections, naming their keys
    unknown = sorted(key for key in readme_keys() if key not in accepted)
    assert not unknown, f"README configuration rows the loader would reject: {unknown}"


def stated_default(meaning: str) -> str | None:
    """The default a row states: "default 10000", "Default unlimited", "default 1,000,000", "`enforce` (default)"."""
    match = re.search(r"(?<!Kafka's )\bdefault:?\s+(unlimited|-?\d[\d,]*(?:\.\d+)?)", meaning, re.IGNORECASE)
    if match:
        return match.group(1).replace(",", "")
    match = re.search(r"`([^`]+)` \(default\b", meaning)
    if match:
        return match.group(1)
    match = re.search(r"\bdefault `([^`]+)`", meaning, re.IGNORECASE)
    return match.group(1) if match else None


def code_defaults() -> dict[str, object]:
    """Defaults the code holds in tables (a derived or unset default is left out)."""
    values = dict(settings_module.parse_settings({}, "s").values)
    defaults = {
        f"settings.{name}": ("unlimited" if value == UNLIMITED else value)
        for name, value in values.items()
        if value is not None and not isinstance(value, Mapping)
    }
    defaults.pop("settings.producer.id.quota.max.hold.ms")  # derived: checked below
    volume = VolumeUsageConfig()
    defaults |= {
        f"volume_usage.{k}": getattr(volume, k)
        for k in (
            "source",
            "topic",
            "freshness_seconds",
            "missing_data_action",
            "produce_base_rate",
            "pause_delay_ms",
            "max_record_bytes",
            "max_volumes_per_snapshot",
            "metrics_top_volumes",
        )
    }
    defaults["volume_usage.describe_log_dirs.interval_seconds"] = parse_volume_usage(
        {
            "source": "describe_log_dirs",
            "describe_log_dirs": {
                "soft_limit": {"type": "ConsumedSpace", "level": 1},
                "hard_limit": {"type": "ConsumedSpace", "level": 2},
            },
        },
        "v",
    ).describe_log_dirs.interval_seconds
    usage = UsageLogConfig(dir="d")
    defaults |= {"usage_log.interval_seconds": usage.interval_seconds, "usage_log.max_files": usage.max_files}
    dynamic = dynamic_source.DynamicConfigSource()
    defaults |= {
        f"dynamic_config.{k}": getattr(dynamic, k) for k in ("topic", "max_entries", "max_key_bytes", "max_value_bytes")
    }
    return defaults


def same(stated: str, value: object) -> bool:
    if isinstance(value, str):
        return stated == value
    if isinstance(value, tuple):  # a list setting, as Kafka writes it: comma-separated
        return stated == ",".join(value)
    try:
        return float(stated) == float(value)
    except ValueError:
        return False


def test_readme_defaults_are_the_codes():
    rows = readme_keys()
    wrong = []
    for key, value in code_defaults().items():
        if key == "volume_usage.source":
            assert re.search(r"`topic` \([^)]*default\)", rows[key]), rows[key]
            continue
        stated = stated_default(rows[key])
        if stated is None or not same(stated, value):
            wrong.append(f"{key}: README {stated!r}, code {value!r}")
    hold = settings_module.parse_settings({}, "s").producer_id_quota_max_hold_ms
    if stated_default(rows["settings.producer.id.quota.max.hold.ms"]) != str(hold):
        wrong.append(f"settings.producer.id.quota.max.hold.ms: code {hold}")
    assert not wrong, "README configuration defaults that are not the code's:\n" + "\n".join(wrong)


def test_readme_yaml_example_settings_are_the_defaults():
    """The first example's ``settings:`` block says "each key has a default": the values shown are those."""
    block = README.split("settings:                                 # optional; each key has a default\n", 1)[1]
    shown = dict(re.findall(r"^  ([a-z.]+): (\S+)$", block.split("\nquotas:", 1)[0], re.MULTILINE))
    assert shown
    values = settings_module.parse_settings({}, "s").values
    wrong = {k: v for k, v in shown.items() if str(values[k]) != v}
    assert not wrong, f"README example settings not at their defaults: {wrong}"


# --- metrics -------------------------------------------------------------------------------------------------------

KINDS = {
    "Counter": "counter",
    "CounterMetricFamily": "counter",
    "Gauge": "gauge",
    "GaugeMetricFamily": "gauge",
    "Histogram": "histogram",
    "HistogramMetricFamily": "histogram",
}
PREFIX = "kafka_quota_proxy_"


class Unknown(Exception):
    pass


def evaluate(node: ast.AST, env: dict, module) -> object:
    """A constant expression of metric names and label lists; ``[... if per_broker else []]`` is an optional
    label, written ``[node_id]`` as the reference writes it."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            str(evaluate(v.value if isinstance(v, ast.FormattedValue) else v, env, module)) for v in node.values
        )
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        if hasattr(module, node.id):
            return getattr(module, node.id)
        raise Unknown(node.id)
    if isinstance(node, ast.List):
        return [evaluate(e, env, module) for e in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return evaluate(node.left, env, module) + evaluate(node.right, env, module)
    if isinstance(node, ast.IfExp):
        body, orelse = evaluate(node.body, env, module), evaluate(node.orelse, env, module)
        if isinstance(body, list) and orelse == []:
            return [f"[{label}]" for label in body]
    raise Unknown(ast.dump(node))


def registered_metrics() -> dict[str, tuple[str, tuple[str, ...]]]:
    """README name (prefix off, counters with _total) -> (type, labels) of every family registered under proxy/."""
    found = {}
    for folder, _, files in os.walk(os.path.join(ROOT, "proxy")):
        for file in files:
            if not file.endswith(".py"):
                continue
            path = os.path.join(folder, file)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
            calls = [
                n
                for n in ast.walk(tree)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in KINDS
            ]
            if not calls:
                continue
            module = importlib.import_module(os.path.relpath(path, ROOT)[:-3].replace(os.sep, "."))
            for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
                parents = {child: parent for parent in ast.walk(function) for child in ast.iter_child_nodes(parent)}
                env = {}
                for node in sorted(
                    (n for n in ast.walk(function) if isinstance(n, (ast.Assign, ast.Call))),
                    key=lambda n: (n.lineno, n.col_offset),
                ):
                    if isinstance(node, ast.Assign):
                        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                            try:
                                env[node.targets[0].id] = evaluate(node.value, env, module)
                            except Unknown:
                                env.pop(node.targets[0].id, None)
                        continue
                    if node not in calls:
                        continue
                    kind = KINDS[node.func.id]
                    labels_node = {kw.arg: kw.value for kw in node.keywords}.get(
                        "labels" if node.func.id.endswith("Family") else "labelnames"
                    )
                    if labels_node is None and not node.func.id.endswith("Family") and len(node.args) > 2:
                        labels_node = node.args[2]
                    for bound in loop_passes(node, parents, env, module):
                        name = evaluate(node.args[0], bound, module)
                        labels = tuple(evaluate(labels_node, bound, module)) if labels_node is not None else ()
                        assert name.startswith(PREFIX), f"{path}: {name} lacks the {PREFIX} prefix"
                        short = name.removeprefix(PREFIX)
                        if kind == "counter" and not short.endswith("_total"):
                            short += "_total"
                        assert found.get(short, (kind, labels)) == (kind, labels), f"{short} registered two ways"
                        found[short] = (kind, labels)
    return found


def loop_passes(call: ast.AST, parents: dict, env: dict, module) -> list[dict]:
    """The names bound in each pass of the ``for`` loops over constants around ``call`` (families made in a loop
    over a module's table of kinds), laid over ``env``; ``[env]`` when no such loop encloses it."""
    loops = []
    node = parents.get(call)
    while node is not None:
        if isinstance(node, ast.For):
            loops.append(node)
        node = parents.get(node)
    passes = [env]
    for loop in reversed(loops):
        try:
            items = evaluate(loop.iter, env, module)
        except Unknown:
            continue
        passes = [{**bound, **targets(loop.target, item)} for bound in passes for item in items]
    return passes


def targets(target: ast.AST, value: object) -> dict:
    """The names a ``for`` target binds to one of its values."""
    if isinstance(target, ast.Name):
        return {target.id: value}
    if isinstance(target, ast.Tuple) and isinstance(value, (tuple, list)) and len(value) == len(target.elts):
        return {k: v for element, item in zip(target.elts, value) for k, v in targets(element, item).items()}
    raise Unknown(ast.dump(target))


def readme_metrics() -> dict[str, tuple[str, tuple[str, ...]]]:
    rows = {}
    for cells in table("| metric | type | labels | meaning |"):
        labels = tuple(label.strip() for label in cells[2].split(",") if label.strip())
        for name in row_names(cells[0]):
            assert name not in rows, f"README metrics table: {name} has two rows"
            rows[name] = (cells[1], labels)
    return rows


def test_registered_metrics_found():
    """The source scan finds the families it should (so the comparison below cannot pass by finding none)."""
    found = registered_metrics()
    assert found["requests_total"] == ("counter", ("listener", "api"))
    assert found["quota_byte_rate"] == ("gauge", ("quota", "user", "client_id", "[node_id]"))
    assert found["request_latency_seconds"][0] == "histogram"
    assert len(found) > 80


def test_every_metric_has_a_readme_row_with_its_type_and_labels():
    rows, found = readme_metrics(), registered_metrics()
    missing = sorted(set(found) - set(rows))
    assert not missing, f"metrics with no row in README's Metrics table: {missing}"
    wrong = {name: (rows[name], found[name]) for name in found if rows[name] != found[name]}
    assert not wrong, f"README Metrics rows whose (type, labels) are not the code's (README, code): {wrong}"


def test_every_readme_metric_exists():
    unknown = sorted(set(readme_metrics()) - set(registered_metrics()))
    assert not unknown, f"README Metrics rows naming no registered metric: {unknown}"


# --- command lines -------------------------------------------------------------------------------------------------


def readme_commands() -> list[str]:
    """Every ``kafka-quota-proxy ...`` line of the README's code blocks (continuations joined)."""
    commands = []
    blocks = re.findall(r"^```([a-z]*)\n(.*?)^```", README, re.DOTALL | re.MULTILINE)  # each fence with its language
    for block in (text for language, text in blocks if language in ("", "sh", "bash", "console")):
        block = block.replace("\\\n", " ")
        for line in block.splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("kafka-quota-proxy "):
                commands.append(line)
    return commands


def test_readme_command_lines_parse():
    from analytics.cli import build_parser as analyze_parser
    from proxy.cli.configs import build_parser as configs_parser
    from proxy.cli.explain import build_parser as explain_parser
    from proxy.cli.main import build_parser

    commands = readme_commands()
    assert len(commands) >= 5
    for command in commands:
        argv = [a.strip("'\"") for a in re.findall(r"'[^']*'|\"[^\"]*\"|\S+", command)][1:]
        if argv == ["--help"]:
            continue
        try:
            if argv[0] == "configs":  # main() hands these on to their own parsers
                configs_parser().parse_args(argv[1:])
            elif argv[0] == "explain":
                explain_parser().parse_args(argv[1:])
            elif argv[0] == "analyze":
                analyze_parser().parse_args(argv)
            else:
                build_parser().parse_args(argv)
        except SystemExit as exc:
            if exc.code != 0:  # 0: --version or --help, which print and exit
                pytest.fail(f"README command line does not parse ({exc.code}): {command}")


def test_readme_make_targets_exist():
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        targets = set(re.findall(r"^([A-Za-z0-9_-]+):", f.read(), re.MULTILINE))
    named = set(re.findall(r"`make ([a-z0-9_-]+)", README))
    assert named and not named - targets, f"make targets the README names that the Makefile lacks: {named - targets}"
