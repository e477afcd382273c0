"""quota/'s folders import one way only, primitives <- managers <- sharing <- explain (<- the package's own
``__init__``), and no module of quota/ is in an import circle, not even through an import made only for the type
checker (``if TYPE_CHECKING:``) or inside a function: a circle hidden that way is still two modules that cannot be
understood, or moved, one without the other. Read from the source (:mod:`tests.import_graph`), so nothing is imported
to check."""

from pathlib import Path

import pytest

from tests.import_graph import circles, graph

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "quota"
LAYERS = ("primitives", "managers", "sharing", "explain")  # each may import its own folder and those before it
TOP = len(LAYERS)  # quota/__init__.py: the package's public names, over every folder


def _layer(module: str) -> int:
    parts = module.split(".")
    return TOP if len(parts) == 1 else LAYERS.index(parts[1])


def _against_the_direction(edges: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} imports {b}" for a, targets in edges.items() for b in targets if _layer(b) > _layer(a))


def test_every_folder_of_quota_has_a_layer():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(LAYERS)


def test_quota_imports_only_down_its_layers():
    assert _against_the_direction(graph(PACKAGE)) == []


def test_quota_has_no_import_circle():
    assert circles(graph(PACKAGE)) == []


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
    assert _against_the_direction(graph(root)) == [
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
    assert circles(graph(root)) == [["quota.managers.a", "quota.managers.b", "quota.managers.c"]]
