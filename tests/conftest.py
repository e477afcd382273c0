import os

import pytest
from hypothesis import settings

# CI runs the property tests on a fixed seed so a submission's result does not depend on which random examples
# came up; locally (`make test` without CI set) every run explores new examples.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

from tests.harness import RunningProxy, Tansu, free_port, proxy_config, start_proxy


def pytest_itemcollected(item):
    """For `make test`'s parallel run (pytest-xdist, ``--dist loadgroup``): tests marked ``measures_rate`` form groups
    (the mark's ``group``, default "rate"), each run by one worker one test after another, so at most three rate
    measurements share the 2 cores (all of them at once would measure each other; one group alone takes longer than
    the whole suite may); tests using the ``spark`` fixture form the "spark" group (one SparkSession start-up, not one
    per worker), which the demo's test joins (rates, and a Spark job of its own), so the three chains are about as long
    (about 3.5 minutes each, summed from the tests' durations alone). The other two of ``make test``'s five workers
    run everything else: its integration tests alone wait about as long as two chains together (each using about a
    tenth of a core), more than one worker beside the chains can get through before they end. Marked here, as
    each test is collected: xdist turns the groups into node ids in its own ``pytest_collection_modifyitems``, which
    runs before this conftest's. Without xdist the marks do nothing."""
    rate = item.get_closest_marker("measures_rate")
    if rate is not None:
        item.add_marker(pytest.mark.xdist_group(rate.kwargs.get("group", "rate")))
    elif "spark" in getattr(item, "fixturenames", ()):
        item.add_marker(pytest.mark.xdist_group("spark"))


# Unit-test modules with tests of 5-20 s each (the demo's exit paths, the wheel build, 200,000-entity tables,
# stateful property tests): first among the unit tests, so no worker is left with one of them at the very end.
SLOW_UNIT_MODULES = ("test_exits.py", "test_deploy.py", "test_table_changes.py", "test_flow_machine.py",
                     "test_chunked.py", "test_volume_scaled.py", "test_usage_delta.py", "test_scrape_bounds.py")


# The longest tests of the serial groups (40-150 s each), first in their group: what runs at a group's end then is
# its short tests, beside the unit tests that start on the other workers once the integration tests are handed out.
LONGEST_IN_GROUP = (
    "test_demo_scenario_verdicts_pass",
    "test_default_eleven_windows_clients_throttled_never_stalled_at_their_quota",
    "test_producers_held_to_their_quota",
    "test_requests_large_compared_with_quota_times_window_not_worse_than_kafka",
    "test_a_sidecar_with_two_workers_is_one_peer_and_the_tenant_gets_its_quota_once",
    "test_one_tenant_spread_over_two_workers_gets_its_quota_in_total",
    "test_consumers_held_to_their_quota",
)


def pytest_collection_modifyitems(config, items):
    """The integration tests first, so the long ones start early and short unit tests fill the end; among the unit
    tests the slow modules first. CPU-bound unit tests so run while the rate groups end or after, not beside
    their whole measurements. Within each serial group (xdist runs a group's tests in this order) the longest first."""
    def key(item):
        if item.originalname in LONGEST_IN_GROUP:
            return -len(LONGEST_IN_GROUP) + LONGEST_IN_GROUP.index(item.originalname)
        return 0 if "integration" in item.path.parts else 1 if item.path.name in SLOW_UNIT_MODULES else 2
    items.sort(key=key)


@pytest.fixture(params=["uvloop", "asyncio"])
def sidecar(request):
    """Tansu advertising the proxy's address, and the proxy in front of it (sidecar mode), on uvloop (what the
    proxy runs on in production) and on the standard asyncio loop (its fallback)."""
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    proxy = start_proxy(proxy_config(proxy_port, broker_port), loop_kind=request.param)
    yield Sidecar(proxy, broker)
    proxy.stop()
    broker.stop()


class Sidecar:
    def __init__(self, proxy: RunningProxy, broker: Tansu) -> None:
        self.proxy = proxy
        self.broker = broker

    @property
    def bootstrap(self) -> str:
        return self.proxy.bootstrap
