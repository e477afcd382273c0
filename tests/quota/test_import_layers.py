"""quota/'s folders import one way only, primitives <- managers <- sharing <- explain (<- the package's own
``__init__``), and no module of quota/ is in an import circle, not even through an import made only for the type
checker (``if TYPE_CHECKING:``) or inside a function: a circle hidden that way is still two modules that cannot be
understood, or moved, one without the other. Read from the source (an AST scan), so nothing is imported to check."""

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "quota"
LAYERS = ("primitives", "managers", "sharing", "explain")  # each may import its own folder and those before it
TOP = len(LAYERS)  # quota/__init__.py: the package's public names, over every folder


def _module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(package: Path) -> dict[str, Path]:
    return {_module_name(path, package): path for path in sorted(package.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``name`` imports anywhere in its source (``from a import b`` names the module
    ``a.b`` when there is one, else ``a``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # a name inside a module: the module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _layer(module: str) -> int:
    parts = module.split(".")
    return TOP if len(parts) == 1 else LAYERS.index(parts[1])


@functools.cache  # the real package's is read once for both tests
def _graph(package: Path) -> dict[str, set[str]]:
    modules = _modules(package)
    return {name: _imports(name, path, set(modules)) for name, path in modules.items()}


def _against_the_direction(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} imports {b}" for a, targets in graph.items() for b in targets if _layer(b) > _layer(a))


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles (strongly connected components of more than one module), each sorted (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(out)


def test_every_folder_of_quota_has_a_layer():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(LAYERS)


def test_quota_imports_only_down_its_layers():
    assert _against_the_direction(_graph(PACKAGE)) == []


def test_quota_has_no_import_circle():
    assert _circles(_graph(PACKAGE)) == []


@pytest.fixture
def tree(tmp_path):
    """A small quota/ written on disk: the scan as it reads the real one."""
    root = tmp_path / "quota"

    def write(files: dict[str, str]) -> Path:
        for rel, text in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        for folder in LAYERS:
            (root / folder).mkdir(parents=True, exist_ok=True)
            (root / folder / "__init__.py").touch()
        (root / "__init__.py").touch()
        return root

    return write


def test_the_scan_finds_an_import_up_the_layers_even_for_the_type_checker_only(tree):
    root = tree(
        {
            "primitives/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from quota.managers.b import B\n",
            "managers/b.py": "class B: ...\n",
            "sharing/c.py": "def f():\n    from ..explain import d\n",
            "explain/d.py": "import quota.primitives.a\n",
        }
    )
    assert _against_the_direction(_graph(root)) == [
        "quota.primitives.a imports quota.managers.b",
        "quota.sharing.c imports quota.explain.d",
    ]


def test_the_scan_finds_a_circle_inside_one_folder(tree):
    root = tree(
        {
            "managers/a.py": "from quota.managers.b import B\n",
            "managers/b.py": "from quota.managers import c\nclass B: ...\n",
            "managers/c.py": "import quota.managers.a\n",
            "managers/d.py": "from quota.managers.a import x\n",
        }
    )
    assert _circles(_graph(root)) == [["quota.managers.a", "quota.managers.b", "quota.managers.c"]]
