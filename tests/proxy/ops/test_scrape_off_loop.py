"""A Prometheus scrape never runs on the event loop: the collectors run in another thread, and the loop answers
other requests while a scrape is being built. The operations server over a real loopback socket (port 0); the
collector stands for the quota collectors' work with 10^6 tenants by holding the scrape until the loop has shown it
is free. The waits below are bounds that turn a hang into a failure, not timings."""

import asyncio
import threading
import urllib.request

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily

from proxy.ops.http import OpsServer

BOUND_S = 10.0  # a bound on every wait: only reached when the loop is blocked (the failure)


class SlowCollector:
    """Records the thread it runs in, and holds the scrape until told to go on (or the bound passes)."""

    def __init__(self) -> None:
        self.threads: list[int] = []
        self.entered = threading.Event()
        self.release = threading.Event()

    def describe(self) -> list:
        return []

    def collect(self):
        self.threads.append(threading.get_ident())
        self.entered.set()
        self.release.wait(BOUND_S)
        family = GaugeMetricFamily("scrape_test_value", "A value to find in the exposition.")
        family.add_metric([], 42.0)
        yield family


def get(address, path: str, timeout: float = BOUND_S) -> tuple[int, bytes]:
    with urllib.request.urlopen(f"http://{address[0]}:{address[1]}{path}", timeout=timeout) as response:
        return response.status, response.read()


@pytest.fixture
def ops():
    """An operations server on its own loop thread, its registry holding a SlowCollector."""
    collector = SlowCollector()
    registry = CollectorRegistry()
    registry.register(collector)
    loop = asyncio.new_event_loop()
    loop_thread = threading.Thread(target=loop.run_forever, daemon=True)
    loop_thread.start()
    server = OpsServer(registry, lambda: None)
    address = asyncio.run_coroutine_threadsafe(server.start("127.0.0.1", 0), loop).result(BOUND_S)
    try:
        yield collector, server, address, loop, loop_thread
    finally:
        collector.release.set()
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(BOUND_S)
        loop.call_soon_threadsafe(loop.stop)
        loop_thread.join(BOUND_S)
        loop.close()


def scrape_in_thread(address, into: list) -> threading.Thread:
    thread = threading.Thread(target=lambda: into.append(get(address, "/metrics")), daemon=True)
    thread.start()
    return thread


def test_a_scrape_runs_off_the_loop_and_the_loop_answers_meanwhile(ops):
    collector, _, address, _, loop_thread = ops
    scraped: list[tuple[int, bytes]] = []
    scraper = scrape_in_thread(address, scraped)
    try:
        assert collector.entered.wait(BOUND_S)
        # the scrape is inside the collector: the loop still answers (on the old code it was blocked in collect)
        assert get(address, "/healthz", timeout=3.0) == (200, b"ok\n")
        assert not collector.release.is_set()  # so the answer came while the scrape was held
    finally:
        collector.release.set()
        scraper.join(BOUND_S)
    assert scraped and scraped[0][0] == 200 and b"scrape_test_value 42.0" in scraped[0][1]
    assert collector.threads and loop_thread.ident not in collector.threads


def test_scrapes_that_arrive_during_one_share_its_build(ops):
    """Prometheus servers scraping at once cost one collection (one thread taking the GIL from the loop)."""
    collector, server, address, loop, _ = ops
    asking: list[int] = []
    build = server._exposition

    async def counted() -> bytes:
        asking.append(1)
        return await build()  # joins the build under way before yielding to the loop

    server._exposition = counted
    scraped: list[tuple[int, bytes]] = []
    scrapers = [scrape_in_thread(address, scraped)]
    try:
        assert collector.entered.wait(BOUND_S)
        scrapers.append(scrape_in_thread(address, scraped))

        async def both_asked() -> None:
            while len(asking) < 2:
                await asyncio.sleep(0.01)

        asyncio.run_coroutine_threadsafe(asyncio.wait_for(both_asked(), BOUND_S), loop).result(BOUND_S + 1)
    finally:
        collector.release.set()
        for scraper in scrapers:
            scraper.join(BOUND_S)
    assert len(scraped) == 2 and all(status == 200 and b"scrape_test_value 42.0" in body for status, body in scraped)
    assert len(collector.threads) == 1


def test_a_scrape_is_built_with_the_loop_first_in_line_for_the_gil(ops):
    """While a scrape is built the loop waits at most 1 ms for the GIL between two bytecodes (the switch interval,
    5 ms otherwise) and no garbage collection runs (a young-generation collection while the quota collectors hold a
    snapshot of 10^6 sensors walks every entry with the GIL held); both as before once it is built."""
    import gc
    import sys

    collector, _, address, _, _ = ops
    seen = []
    collect = collector.collect

    def collect_noting_the_interpreter():
        seen.append((gc.isenabled(), sys.getswitchinterval()))
        yield from collect()

    collector.collect = collect_noting_the_interpreter
    collector.release.set()
    before = sys.getswitchinterval()
    assert get(address, "/metrics")[0] == 200
    assert seen == [(False, 0.001)]
    assert gc.isenabled() and sys.getswitchinterval() == before
