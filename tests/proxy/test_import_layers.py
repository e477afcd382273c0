"""proxy/'s folders import one way only, down these layers (a folder imports its own modules and those of the layers
below it, never a folder beside it on its own layer), and no module of proxy/ is in an import circle; every import
counts, made inside a function or only for the type checker too (:mod:`tests.import_graph`, read from the source):

1. ``ground``, ``codec``: what everything stands on (tasks, the clock, bounded logs, the proxy's id; bytes to values
   and back, every protocol fact once), importing nothing else of the proxy;
2. ``session``: who is on the other end of a connection;
3. ``cluster``: the brokers, their ports and topics, and the proxy's own Kafka traffic;
4. ``enforcement``: the quota managers the proxy holds and the snapshots they read;
5. ``apis``: how a request is planned: it decides and returns what happened as data (a plan, its response leg, the
   usage it accounted for), and acts on nothing: it records no metric or usage, logs no audit, holds no observer
   (the dynamic config it knows by the interface it declares, :mod:`proxy.apis.config_topic`);
6. ``ops``: what the proxy records and shows: metrics and their collectors, the usage log, the audit, its endpoints;
7. ``observers``: the background followers and publishers (dynamic config, volume usage, the usage topic), which
   publish what the request path reads and count in ``ops``;
8. ``connection``: the connection runtime: it acts on the plans (forward, hold, mute, answer) and records what they
   accounted for;
9. the modules at proxy/'s top (``app.py``, ``listener_contexts.py``, ``broker_listeners.py``, ``housekeeping.py``):
   a running proxy assembled from all of the above;
10. ``workers``: the supervising parent and its worker processes, each running an assembled proxy;
11. ``cli``: the command lines.
"""

from __future__ import annotations

from pathlib import Path

from tests.import_graph import circles, graph

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "proxy"
TOP = "(top)"  # proxy/*.py and the package's __init__
LAYERS = (
    ("ground", "codec"),
    ("session",),
    ("cluster",),
    ("enforcement",),
    ("apis",),
    ("ops",),
    ("observers",),
    ("connection",),
    (TOP,),
    ("workers",),
    ("cli",),
)
RANK = {folder: rank for rank, folders in enumerate(LAYERS) for folder in folders}


def _folder(module: str, package: Path) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (package / parts[1]).is_dir() else TOP


def _against_the_direction(edges: dict[str, set[str]], package: Path) -> list[str]:
    out = []
    for a, targets in edges.items():
        for b in targets:
            fa, fb = _folder(a, package), _folder(b, package)
            if fa != fb and RANK[fb] >= RANK[fa]:
                out.append(f"{a} ({fa}) imports {b} ({fb})")
    return sorted(out)


def test_every_folder_of_proxy_has_a_layer():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders | {TOP} == set(RANK)


def test_proxy_imports_only_down_its_layers():
    assert _against_the_direction(graph(PACKAGE), PACKAGE) == []


def test_proxy_has_no_import_circle():
    assert circles(graph(PACKAGE)) == []


def test_the_scan_finds_imports_up_and_across_the_layers_at_any_depth(tmp_path):
    """A small proxy/ written on disk, read as the real one is: an import up a layer inside a function, one only for
    the type checker, one across a layer (ground and codec stand side by side, neither on the other), and the top's
    modules above the runtime; imports down the layers and inside a folder pass."""
    root = tmp_path / "proxy"
    files = {
        "app.py": "from proxy.connection.core import Core\nfrom proxy.apis import plan\n",
        "apis/plan.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from proxy.ops.usage import Table\n",
        "apis/stages.py": "from . import plan\nfrom ..codec import frame\n",
        "codec/frame.py": "def f():\n    from proxy.ground import tasks\n",
        "connection/core.py": "import proxy.app\nfrom proxy.ops.usage import Table\n",
        "ground/tasks.py": "",
        "ops/usage.py": "from proxy.apis.plan import Plan\n",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        (path.parent / "__init__.py").touch()
    assert _against_the_direction(graph(root), root) == [
        "proxy.apis.plan (apis) imports proxy.ops.usage (ops)",
        "proxy.codec.frame (codec) imports proxy.ground.tasks (ground)",
        "proxy.connection.core (connection) imports proxy.app ((top))",
    ]
    assert circles(graph(root)) == [["proxy.apis.plan", "proxy.ops.usage"], ["proxy.app", "proxy.connection.core"]]
