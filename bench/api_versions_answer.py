"""The proxy's cost of one broker ApiVersions answer (issue 44, T2): every client asks ApiVersions first on every
connection, and the proxy intersects the broker's ranges with its own. Before: the answer decoded twice (to note the
broker's ranges, then to intersect them) and encoded again, on every connection; now each distinct answer is worked
out once (:func:`proxy.apis.api_versions.broker_answer`). Times both on a v3 answer listing 92 APIs with features.

Usage: ``python bench/api_versions_answer.py [--answers 2000]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import timeit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from proxy.apis.api_versions import broker_answer, intersect  # noqa: E402
from proxy.codec.apis import API_VERSIONS  # noqa: E402
from proxy.codec.messages import decode_api_versions_response, encode_response, new_response  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=2000)
    n = parser.parse_args().answers
    msg = new_response(
        API_VERSIONS,
        3,
        api_keys=[{"api_key": k, "min_version": 0, "max_version": 12} for k in range(92)],
        supported_features=[{"name": "metadata.version", "min_version": 1, "max_version": 27}],
        finalized_features_epoch=12345,
        finalized_features=[{"name": "metadata.version", "max_version_level": 27, "min_version_level": 27}],
    )
    body = encode_response(API_VERSIONS, 3, msg)

    def before() -> None:
        decode_api_versions_response(3, memoryview(body))
        intersect(3, memoryview(body), {})

    def now() -> None:
        received = memoryview(bytearray(body))  # each connection's answer in a buffer of its own
        broker_answer(3, (), bytes(received))
        broker_answer(3, (), bytes(received))

    print(f"one ApiVersions v3 answer of {len(body)} bytes, min of 5 x {n:,}:")
    for name, once in (("before: decode, decode + intersect + encode", before), ("now: worked out once", now)):
        print(f"  {name}: {min(timeit.repeat(once, number=n, repeat=5)) / n * 1e6:.1f} us an answer")


if __name__ == "__main__":
    main()
