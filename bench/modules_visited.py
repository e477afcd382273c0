"""Modules (and calls) of the tree whose functions run while the connection core reads small Produce requests
under a byte-rate quota (``ConnectionCore.client_bytes``, on ``bench/produce_path_cost.py``'s workload), per request.

Usage: ``python bench/modules_visited.py TREE`` (a checkout of the repository, e.g. ``git worktree add /tmp/old REV``).
"""

import os
import sys

tree = os.path.abspath(sys.argv[1])
sys.path.insert(0, tree)
sys.path.insert(0, os.path.join(tree, "bench"))
import proxy.connection.core as core  # noqa: E402

seen: dict[str, int] = {}


def prof(frame, event, arg):
    if event == "call":
        f = frame.f_code.co_filename
        if f.startswith(tree):
            seen[os.path.relpath(f, tree)] = seen.get(os.path.relpath(f, tree), 0) + 1


orig = core.ConnectionCore.client_bytes


def traced(self, data):
    sys.setprofile(prof)
    try:
        return orig(self, data)
    finally:
        sys.setprofile(None)


core.ConnectionCore.client_bytes = traced  # type: ignore[method-assign]  # traced for this measurement only
import produce_path_cost  # noqa: E402

produce_path_cost.one_run(400, 40)
print(len(seen), "modules;", sum(seen.values()) // 400, "calls per request")
for name, calls in sorted(seen.items(), key=lambda kv: -kv[1]):
    print(f"  {calls // 400:4d} {name}")
