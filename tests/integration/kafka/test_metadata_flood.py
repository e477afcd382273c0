"""A tenant naming made-up topics in Metadata requests does not grow the proxy (issue 44, T1), against Apache Kafka.

Before, every name a Metadata answer carried was kept in the proxy-wide topic table as "0 partitions", never
dropped: 2,000 names of 200 characters a request, pipelined on two connections with no credentials, took a proxy
from 41 to 894 MiB in 40 s (350 B a name) and it stayed there. The proxy runs here as an operator runs it (its own
process, ``workers: 1``), and its resident memory is read from /proc before and after the flood.
"""

from __future__ import annotations

import socket
import threading

import pytest

from proxy.codec.apis import METADATA
from proxy.codec.header import encode_request_header, frame
from proxy.codec.messages import encode_request, new_request
from tests.harness import free_port
from tests.integration.faults import ProxyProcess
from tests.integration.raw import read_frame

NAMES_PER_REQUEST = 2_000
NAME_LENGTH = 200
REQUESTS_PER_CONNECTION = 60  # 2 x 60 x 2,000 = 240,000 made-up names: about 80 MiB kept before the fix
PIPELINED = 8  # requests a connection keeps in flight


def made_up_metadata(connection: int, n: int) -> bytes:
    prefix = f"made-up-{connection}-{n}-"
    names = [(prefix + str(i)).ljust(NAME_LENGTH, "x") for i in range(NAMES_PER_REQUEST)]
    request = new_request(METADATA, 12, topics=[{"name": name} for name in names], allow_auto_topic_creation=False)
    return frame(encode_request_header(METADATA, 12, n, "made-up") + encode_request(METADATA, 12, request))


def flood(port: int, connection: int, answered: list) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sent = 0
        for n in range(REQUESTS_PER_CONNECTION):
            if sent - answered[connection] >= PIPELINED:
                read_frame(sock)
                answered[connection] += 1
            sock.sendall(made_up_metadata(connection, n))
            sent += 1
        while answered[connection] < sent:
            read_frame(sock)
            answered[connection] += 1


def rss_mib(proxy: ProxyProcess) -> float:
    return proxy.rss_bytes() / 2**20


@pytest.mark.long_running(seconds=15)
def test_metadata_naming_made_up_topics_leaves_the_proxys_memory_where_it_was(kafka1, tmp_path):
    port, metrics = free_port(), free_port()
    proxy = ProxyProcess(
        {
            "upstream": {"bootstrap_servers": [kafka1.direct_bootstrap]},
            "listeners": [{"name": "PLAINTEXT", "bind": f"127.0.0.1:{port}"}],
            "metrics": {"bind": f"127.0.0.1:{metrics}"},
            "settings": {"workers": 1},
        },
        str(tmp_path / "proxy.yaml"),
        port,
    )
    proxy.start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:  # one first: buffers, codec
            sock.sendall(made_up_metadata(9, 0))
            read_frame(sock)
        answered = [0, 0]
        before = rss_mib(proxy)
        threads = [threading.Thread(target=flood, args=(port, c, answered)) for c in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert answered == [REQUESTS_PER_CONNECTION] * 2  # every request answered: the broker saw them all
        after = rss_mib(proxy)
        names = 2 * REQUESTS_PER_CONNECTION * NAMES_PER_REQUEST
        print(f"\nmade-up topic names: {names:,}, proxy RSS {before:.0f} -> {after:.0f} MiB", flush=True)
        # 350 B a name kept would be 80 MiB; what the answers pass through costs buffers, not names
        assert after - before < 25, f"the proxy grew {after - before:.0f} MiB for {names:,} made-up names"
    finally:
        proxy.stop()
