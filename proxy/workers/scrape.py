"""The parent's /metrics: its own registry and every live worker's exposition with a ``worker`` label added to
each of the worker's samples, one HELP/TYPE per family and each family's samples together (the parent's and the
workers' ``process_*`` and ``python_*`` families are the same families: the parent's samples have no ``worker``). Read from each worker's loopback ops port in the scrape thread, so a slow
worker delays the scrape (at most :data:`FETCH_TIMEOUT_S` each), never the parent's loop; a worker that does not
answer is left out of that scrape and counted."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable, Iterable

FETCH_TIMEOUT_S = 5.0


def fetch_worker_metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=FETCH_TIMEOUT_S) as answer:
        return answer.read().decode()


def labelled(line: str, worker: str) -> str:
    """A sample line with ``worker="<worker>"`` as its first label."""
    brace, space = line.find("{"), line.find(" ")
    if brace != -1 and (space == -1 or brace < space):
        rest = line[brace + 1 :]
        return f'{line[: brace + 1]}worker="{worker}"{"" if rest.startswith("}") else ","}{rest}'
    return f'{line[:space]}{{worker="{worker}"}}{line[space:]}'


def merge(expositions: Iterable[tuple[str | None, str]]) -> str:
    """``(worker, text)`` pairs merged into one exposition: families in the order first seen, each family's HELP
    and TYPE once, its samples from every worker labelled with it (a worker None: the parent's, not labelled)."""
    heads: dict[str, list[str]] = {}
    samples: dict[str, list[str]] = {}
    for worker, text in expositions:
        family = None
        for line in text.splitlines():
            if not line:
                continue
            if line.startswith("# HELP ") or line.startswith("# TYPE "):
                family = line.split(" ", 3)[2]
                head = heads.setdefault(family, [])
                samples.setdefault(family, [])
                if len(head) < 2 and line not in head:
                    head.append(line)
            elif line.startswith("#"):
                continue
            elif family is not None:
                samples[family].append(line if worker is None else labelled(line, worker))
    out = []
    for family, head in heads.items():
        out.extend(head)
        out.extend(samples[family])
    return "\n".join(out) + ("\n" if out else "")


def workers_exposition(
    own: str,
    ports: Iterable[tuple[int, int]],
    failed: Callable[[int], None],
    fetch: Callable[[int], str] = fetch_worker_metrics,
) -> bytes:
    """The parent's exposition ``own`` and every worker's, merged; ``ports`` are ``(worker index, ops port)``,
    ``failed(index)`` is called for each worker that did not answer."""
    texts: list[tuple[str | None, str]] = [(None, own)]
    for index, port in ports:
        try:
            texts.append((str(index), fetch(port)))
        except (OSError, ValueError):
            failed(index)
    return merge(texts).encode()
