"""The configurations under ``examples/`` as the tests run them: loaded as shipped, then made local by a test.

A test names every change it makes (:func:`localized`): the addresses (``listeners[*].bind``,
``upstream.bootstrap_servers``, ``metrics.bind``, cluster mode's ``broker_port_base`` and ``advertised_host``) and
the machine's own paths and credentials (certificate files, a password file, log dirs, a broker id), and nothing
else; whatever it does not name is run as an operator copies it. The file it writes is checked by
``kafka-quota-proxy check-config`` and started.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from proxy.cli.main import main as cli

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def example(name: str) -> dict:
    return yaml.safe_load((EXAMPLES / name).read_text())


def localized(name: str, directory: Path, changes: dict[str, object]) -> tuple[dict, Path]:
    """``examples/<name>`` with ``changes`` (dotted key paths, ``[i]`` for list items, each of which must exist in
    the example) applied, written to ``directory`` and accepted by ``check-config``; the raw configuration and the
    file."""
    raw = example(name)
    for dotted, value in changes.items():
        *parents, last = _steps(dotted)
        node = raw
        for step in parents:
            node = node[step]
        assert (last in node) if isinstance(node, dict) else last < len(node), f"{name} has no {dotted}"
        node[last] = value
    path = directory / name
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    assert cli(["check-config", "--config", str(path)]) == 0, f"check-config refuses {name} made local"
    return raw, path


def _steps(dotted: str) -> list:
    steps: list = []
    for part in dotted.split("."):
        name, _, index = part.partition("[")
        steps.append(name)
        if index:
            steps.append(int(index.rstrip("]")))
    return steps
