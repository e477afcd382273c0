"""Instructions of each piece of a consumer's Fetch on the pure path, counted by callgrind: where the figure of
``bench/pipeline_instructions.py --api fetch --quotas`` goes.

The pair is bench/pipeline_cost.py's (a Fetch v16 of 10 partitions and its empty answer, issue 46's quotas in
cluster mode). Each piece is called N times in a child under ``valgrind --tool=callgrind`` for two values of N; the
difference of the totals over the difference of the calls is its cost, the start-up cancelling out:

- ``plan``: the request's plan at its header (the chain folded: node endpoints, consumer byte rate, topic rates);
- ``decide``: that plan's decision on the body (the request skimmed for ``ReplicaState``, the budget, the cap; the
  leg it adds is joined to the plan's once per connection by the request path);
- ``leg``: the answer's leg, the plan's and the decision's (skimmed for ``NodeEndpoints``, the budget again and the
  trim, the charge);
- ``skim-request``, ``skim-answer``, ``budget``, ``charge``: those parts alone.

Usage: ``python bench/fetch_pieces.py [--calls 1000 6000] [PIECE ...]`` (about two minutes a piece).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PIECES = ("plan", "decide", "leg", "skim-request", "skim-answer", "budget", "charge")


def pieces() -> dict[str, Callable[[], object]]:
    from bench.pipeline_cost import bodies, scope_for
    from proxy.apis import Session, plan_request
    from proxy.apis.byte_rate import _budget
    from proxy.codec.apis import FETCH
    from proxy.codec.fetch_prefix import fetch_body_facts
    from proxy.codec.header import encode_request_header, frame
    from proxy.codec.produce_prefix import parse_request_prefix
    from proxy.codec.skim import tagged_fields

    _, request, answer = bodies("fetch", 16)
    scope, session = scope_for(True), Session("P", "127.0.0.1")
    header = parse_request_prefix(memoryview(frame(encode_request_header(FETCH, 16, 7, "bench") + request)), 1 << 30)
    plan = plan_request(scope, session, header)
    body, answered = memoryview(request), memoryview(answer)
    decide = plan.decide
    assert decide is not None
    leg = plan.leg.then(decide(body).leg)  # type: ignore[union-attr]  (a Fetch's decision forwards it)
    fetch, user = scope.quotas.fetch, session.user
    fetch.record_and_decide(user, "bench", 100)  # a known client, as every Fetch after its first
    return {
        "plan": lambda: plan_request(scope, session, header),
        "decide": lambda: decide(body),
        "leg": lambda: leg.run(answered, lambda rewritten: len(answered), None),
        "skim-request": lambda: fetch_body_facts(16, body),
        "skim-answer": lambda: tagged_fields(FETCH, "response", 16, answered),
        "budget": lambda: _budget(fetch, user, "bench"),
        "charge": lambda: fetch.record_and_decide(user, "bench", len(answered)),
    }


def instructions(piece: str, calls: int, directory: str) -> int:
    out = f"{directory}/callgrind.{piece}.{calls}"
    subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__, "--child", piece]
        + [str(calls)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    with open(out) as f:
        found = re.search(r"^(?:summary|totals): (\d+)", f.read(), re.M)
    if found is None:
        raise RuntimeError(f"no instruction total in {out}")
    return int(found.group(1))


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        call = pieces()[sys.argv[2]]
        for _ in range(int(sys.argv[3])):
            call()
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, nargs=2, default=[1000, 6000], metavar=("FEW", "MANY"))
    parser.add_argument("pieces", nargs="*", metavar="PIECE", help=f"some of {', '.join(PIECES)} (default: all)")
    args = parser.parse_args()
    unknown = set(args.pieces) - set(PIECES)
    if unknown:
        parser.error(f"no piece {', '.join(sorted(unknown))}: {', '.join(PIECES)}")
    few, many = args.calls
    with tempfile.TemporaryDirectory(prefix="callgrind-") as work:
        for piece in args.pieces or PIECES:
            low, high = instructions(piece, few, work), instructions(piece, many, work)
            print(f"{piece}: {(high - low) / (many - few):,.0f} instructions a call", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
