"""The parent's /metrics: its own registry, then every live worker's exposition with a ``worker`` label added to
each sample, one HELP/TYPE per family. Read from each worker's loopback ops port in the scrape thread, so a slow
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
        rest = line[brace + 1:]
        return f'{line[:brace + 1]}worker="{worker}"{"" if rest.startswith("}") else ","}{rest}'
    return f'{line[:space]}{{worker="{worker}"}}{line[space:]}'


def merge(expositions: Iterable[tuple[str, str]]) -> str:
    """``(worker, text)`` pairs merged into one exposition: families in the order first seen, each family's HELP
    and TYPE once, its samples from every worker labelled with it."""
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
                samples[family].append(labelled(line, worker))
    out = []
    for family, head in heads.items():
        out.extend(head)
        out.extend(samples[family])
    return "\n".join(out) + ("\n" if out else "")


def workers_exposition(ports: Iterable[tuple[int, int]], failed: Callable[[int], None],
                       fetch: Callable[[int], str] = fetch_worker_metrics) -> bytes:
    """Every worker's metrics, merged; ``ports`` are ``(worker index, ops port)``, ``failed(index)`` is called for
    each worker that did not answer."""
    texts = []
    for index, port in ports:
        try:
            texts.append((str(index), fetch(port)))
        except (OSError, ValueError):
            failed(index)
    return merge(texts).encode()
