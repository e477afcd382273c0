"""Nanoseconds per :func:`proxy.apis.plan_request` of one request header: how a request is planned at its header
(its API's chain of stages, or the pass-through path), alone, timed by :mod:`timeit`.

The listener and its quotas are ``bench/pipeline_cost.py``'s (``--quotas``: issue 46's, in cluster mode;
``--request-rate``: a ``request_rate`` for every user, never binding); the header is that of ``--api``'s request
there, client id ``bench``. Prints the best of ``--repeat`` runs of ``--number`` plans, and every run's, in ns per
plan. Wall time: run it beside the other tree in turn, and read it with the load (``bench/pipeline_instructions.py``
counts instructions, which the load does not move). Usage:
``python bench/plan_cost.py [--api list-offsets|metadata|produce|fetch] [--quotas] [--request-rate]
[--number N] [--repeat R]``
"""

from __future__ import annotations

import argparse
import os
import sys
import timeit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.pipeline_cost import DEFAULT_VERSIONS, bodies, scope_for  # noqa: E402
from proxy.apis import Session, plan_request  # noqa: E402
from proxy.codec.header import encode_request_header, frame  # noqa: E402
from proxy.codec.produce_prefix import parse_request_prefix  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--api", choices=sorted(DEFAULT_VERSIONS), default="list-offsets")
    parser.add_argument("--quotas", action="store_true", help="issue 46's quotas, never binding, in cluster mode")
    parser.add_argument("--request-rate", action="store_true", help="a request_rate for every user, never binding")
    parser.add_argument("--number", type=int, default=200_000, help="plans per run")
    parser.add_argument("--repeat", type=int, default=7, help="runs")
    args = parser.parse_args()
    version = DEFAULT_VERSIONS[args.api]
    api_key, request_body, _ = bodies(args.api, version)
    scope = scope_for(args.quotas, args.request_rate)
    whole = bytearray(frame(encode_request_header(api_key, version, 1, "bench") + request_body))
    header = parse_request_prefix(whole, 1 << 30, scope.quotas.reads_produce_prefix)
    session = Session("P", "127.0.0.1")
    runs = timeit.repeat(lambda: plan_request(scope, session, header), number=args.number, repeat=args.repeat)
    per_plan = [run / args.number * 1e9 for run in runs]
    print(
        f"{min(per_plan):.0f} ns per plan_request, best of {args.repeat} x {args.number:,} ({args.api} v{version}, "
        f"{'issue 46 quotas, cluster mode' if args.quotas else 'no quotas'}"
        f"{', request_rate' if args.request_rate else ''}; runs: {', '.join(f'{ns:.0f}' for ns in per_plan)})"
    )


if __name__ == "__main__":
    main()
