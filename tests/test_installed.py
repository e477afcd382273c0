"""The wheel, installed as an operator installs it, run from where the checkout is out of reach.

The module's one fixture builds the wheel from a clean copy of the source tree (``pip wheel --no-deps``), installs
it with the analytics extra into a fresh venv in a temporary directory (``pip install '<wheel>[analytics]'``,
resolved from pip's cache), and every command below runs the venv's console script with the working directory a
temporary one and PYTHONPATH unset, so nothing of the repository can be imported: `--version`, `check-config` on
the shipped sidecar example, `run` in front of Tansu with kafka-python producing and consuming through it, `configs`
altering and describing a quota through it, and `analyze --replay` on a standalone Spark cluster (a master and one
worker started from the installed pyspark). Spark's executors run a second, bare venv's Python
(nothing installed in it): the replay's code reaches them only in the zip the driver gives them.

Every command gets its own temporary folder (``TMPDIR``, and ``java.io.tmpdir`` for Spark's JVM), which must be
empty when it is done: nothing the product makes (``kqp-replay-*``, Spark's ``spark-*`` and ``blockmgr-*``) is left
behind. The Spark daemons get folders of their own (they are the cluster, not the product).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from demo.planner import PLANNER_SUBMIT_ARGS, SMALL_JOB_JVM
from tests.harness import Tansu, free_port, wait_for_port, wait_until
from tests.integration import clients as c
from tests.spark_jvm import UNVERIFIED

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"proxy", "quota", "config", "analytics"}
# The module's tests run one after another in the "end-to-end" group with the demo's (tests/conftest.py), the fixture
# built once: the wheel and the venv (12 s on a quiet machine), the planner on local[*] (43 CPU-s; 66-96 s at load
# 6-13), on a standalone cluster (100 s quiet: Spark's start-up and its many small stages), the rest 5 s. Beside the
# "spark" group's jobs, never a third.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.long_running(seconds=160),
    pytest.mark.timeout(900),
    pytest.mark.xdist_group("end-to-end"),
]


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    bare: Path  # a venv with nothing installed: the Python of Spark's executors
    work: Path  # the working directory of every command: a temporary one, outside the repository
    seconds: dict

    @property
    def script(self) -> str:
        return str(self.venv / "bin" / "kafka-quota-proxy")

    def env(self, tmp: Path, **more: str) -> dict:
        """The environment of a command: no PYTHONPATH, the bare venv's python3 first on PATH (what Spark's
        executors start), ``tmp`` the temporary folder of Python and of Spark's JVM, loopback for Spark. Every JVM
        the command starts loads Spark's classes unverified, as all of the suite's Spark JVMs (tests/spark_jvm.py):
        an option of the test's machine, not of the planner, whose own options are what a user passes."""
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON", "SPARK_HOME", "JAVA_TOOL_OPTIONS")
        }
        env.update(
            PATH=f"{self.bare / 'bin'}{os.pathsep}{env.get('PATH', '')}",
            TMPDIR=str(tmp),
            JAVA_TOOL_OPTIONS=f"-Djava.io.tmpdir={tmp} {UNVERIFIED}",
            SPARK_LOCAL_IP="127.0.0.1",
            **more,
        )
        return env

    def run(self, *argv: str, tmp: Path, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [self.script, *argv],
            cwd=self.work,
            env=self.env(tmp, **env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start(self, *argv: str, tmp: Path, **env: str) -> subprocess.Popen:
        """The command started, ``tmp`` made here, its output to ``tmp``.out and .err beside it (:func:`finished`),
        never a pipe nobody reads while waiting for another command."""
        tmp.mkdir()
        with open(f"{tmp}.out", "w") as out, open(f"{tmp}.err", "w") as err:
            return subprocess.Popen(
                [self.script, *argv], cwd=self.work, env=self.env(tmp, **env), stdout=out, stderr=err
            )


def finished(run: subprocess.Popen, tmp: Path, timeout: float) -> tuple[str, str, int]:
    """(stdout, stderr, exit code) of a command :meth:`Installed.start` started with ``tmp``."""
    code = run.wait(timeout)
    return Path(f"{tmp}.out").read_text(), Path(f"{tmp}.err").read_text(), code


def copy_source(dest: Path) -> None:
    """The repository's files as a fresh clone has them: no venvs, build output or caches."""
    shutil.copytree(
        ROOT,
        dest,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv*",
            "*.so",
            "build",
            "dist",
            "*.egg-info",
            "__pycache__",
            ".pytest_cache",
            ".hypothesis",
            ".fuzz",
            ".demo",
            "out",
        ),
    )


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> Installed:
    base = tmp_path_factory.mktemp("installed")
    seconds = {}
    started = time.monotonic()
    copy_source(base / "src")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(base / "wheels"), str(base / "src")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (base / "wheels").iterdir()
    seconds["wheel"] = time.monotonic() - started
    started = time.monotonic()
    for venv in ("venv", "bare"):  # no pip of their own: the test's pip installs into the first
        made = subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(base / venv)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert made.returncode == 0, made.stderr
    # What an operator types, with the wheel file for the package name (the analytics extra as they install it);
    # --no-compile: the bytecode is written when first imported, not for all of pyspark now.
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(base / "venv" / "bin" / "python"),
            "install",
            "-q",
            "--no-compile",
            f"{wheel}[analytics]",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr
    seconds["venv"] = time.monotonic() - started
    (base / "work").mkdir()
    return Installed(wheel, base / "venv", base / "bare", base / "work", seconds)


@pytest.fixture
def tmp(tmp_path) -> Path:
    """A command's temporary folder, checked empty when the test ends."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    yield folder
    assert sorted(os.listdir(folder)) == [], "left in the temporary folder"


def test_the_wheel_holds_the_four_packages_and_nothing_else_of_the_repository(installed):
    with zipfile.ZipFile(installed.wheel) as z:
        names = set(z.namelist())
        entry_points = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
        metadata = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert not any(
        n.startswith(("tests/", "demo/", "bench/", "deploy/", "examples/", "tools/", "docs/")) for n in names
    )
    with open(ROOT / "pyproject.toml", "rb") as f:
        package_data = tomllib.load(f)["tool"]["setuptools"]["package-data"]
    source = {
        str(p.relative_to(ROOT)) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if "__pycache__" not in p.parts
    }
    data = {
        str(p.relative_to(ROOT)) for pkg, globs in package_data.items() for g in globs for p in (ROOT / pkg).glob(g)
    }
    assert data, "the package data the proxy reads at run time"
    extension = {n for n in names if n.startswith("proxy/codec/_accel.") and n.endswith(".so")}
    assert len(extension) == 1, "the codec's C extension, built where a compiler is (proxy/codec/accel.py)"
    twin = {n for n in names if n.startswith("quota/primitives/_rate.") and n.endswith(".so")}
    assert len(twin) == 1, "the rate's C twin, built where a compiler is (quota/primitives/rate.py)"
    connection = {n for n in names if n.startswith("proxy/connection/_native.") and n.endswith(".so")}
    assert len(connection) == 1, "the connection's C twins, built where a compiler is (proxy/connection/compiled.py)"
    extension |= twin | connection
    assert {n for n in names if not n.split("/")[0].endswith(".dist-info")} == source | data | extension
    assert "kafka-quota-proxy = proxy.cli.main:main" in entry_points
    assert "Provides-Extra: analytics" in metadata


def test_the_installed_package_is_what_runs_and_it_says_its_version(installed, tmp):
    probe = subprocess.run(
        [
            str(installed.venv / "bin" / "python"),
            "-c",
            "import json, analytics, config, proxy, quota; "
            "print(json.dumps([m.__file__ for m in (analytics, config, proxy, quota)]))",
        ],
        cwd=installed.work,
        env=installed.env(tmp),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.returncode == 0, probe.stderr
    site = str(installed.venv / "lib")
    assert all(path.startswith(site) and "site-packages" in path for path in json.loads(probe.stdout))
    version = installed.run("--version", tmp=tmp)
    assert version.returncode == 0 and version.stdout.startswith("kafka-quota-proxy 0.1.0 "), version
    assert "rate: C extension, codec: C extension, connection: C extension" in " ".join(version.stdout.split()), version


def test_check_config_accepts_the_shipped_sidecar_example_and_refuses_a_bad_key(installed, tmp):
    checked = installed.run("check-config", "--config", str(ROOT / "examples" / "sidecar.yaml"), tmp=tmp)
    assert checked.returncode == 0 and "valid" in checked.stdout, checked.stderr
    bad = installed.work / "bad.yaml"
    bad.write_text(
        "upstream: {bootstrap_servers: ['127.0.0.1:9092']}\n"
        "listeners: [{name: PLAINTEXT, bind: '127.0.0.1:19092', bnd: x}]\n"
    )
    refused = installed.run("check-config", "--config", str(bad), tmp=tmp)
    assert refused.returncode == 2 and "listeners[0]" in refused.stderr, refused


def readyz(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def test_run_in_front_of_tansu_clients_produce_and_consume_and_configs_alters_a_quota(installed, tmp):
    proxy_port, broker_port, ops_port = free_port(), free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    config = installed.work / "proxy.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "upstream": {"bootstrap_servers": [f"127.0.0.1:{broker_port}"]},
                "listeners": [{"name": "PLAINTEXT", "bind": f"127.0.0.1:{proxy_port}"}],
                "metrics": {"bind": f"127.0.0.1:{ops_port}"},
                "admin_principals": ["User:ANONYMOUS"],
            }
        )
    )
    proxy = subprocess.Popen(
        [installed.script, "run", "--config", str(config)],
        cwd=installed.work,
        env=installed.env(tmp),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until(lambda: readyz(ops_port) or proxy.poll() is not None, 60, "the installed proxy ready")
        assert proxy.poll() is None, proxy.stdout.read()
        bootstrap = f"127.0.0.1:{proxy_port}"
        c.kp_create_topic(bootstrap, "installed", 2)
        c.kp_produce(bootstrap, "installed", 500, acks="all")
        c.assert_exactly_once_in_order(c.kp_consume(bootstrap, "installed", 500), 500)

        alter = installed.run(
            "configs",
            "--bootstrap-server",
            bootstrap,
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
            "--add-config",
            "producer_byte_rate=1048576",
            tmp=tmp,
        )
        assert alter.returncode == 0 and "producer_byte_rate: (unset) -> 1048576" in alter.stdout, alter
        describe = ["configs", "--bootstrap-server", bootstrap, "--describe", "--entity-type", "users"]
        wait_until(
            lambda: (
                "Quota configs for user alice are producer_byte_rate=1048576\n"
                in installed.run(*describe, tmp=tmp).stdout
            ),
            30,
            "the quota described",
            interval=0.5,
        )
        proxy.send_signal(signal.SIGTERM)
        assert proxy.wait(60) == 0
    finally:
        if proxy.poll() is None:
            proxy.kill()
            proxy.wait(10)
        broker.stop()
    log = proxy.stdout.read()
    assert "kafka-quota-proxy 0.1.0" in log, log


@pytest.fixture(scope="module")
def usage_log(tmp_path_factory) -> Path:
    """A usage log for both planner runs: 3 well-behaved tenants, the four misbehaving ones and the two a quota
    holds (steady/over-quota, batch/nightly-window), 12 intervals."""
    from analytics.generate import Options, write_log

    log = tmp_path_factory.mktemp("usage")
    write_log(str(log), Options(entities=3, intervals=12, seed=11))
    return log


@dataclass(frozen=True)
class Plan:
    out: Path  # the planner's --output
    tmp: Path  # its temporary folder
    stdout: str
    stderr: str
    returncode: int


@pytest.fixture(scope="module")
def local_plan(installed, usage_log, tmp_path_factory) -> Plan:
    """``analyze --replay`` as a user runs it after installing the wheel: no --master (``local[*]``), the driver's
    JVM small (the demo's planner's PYSPARK_SUBMIT_ARGS: what a user passes PySpark), no charts (the cluster run
    draws them). Spark's Python workers start the bare venv's python3, first on PATH: the replay's code reaches them
    only in the zip the planner ships, as on a cluster."""
    base = tmp_path_factory.mktemp("local")
    run = installed.start(
        "analyze",
        "--input",
        str(usage_log),
        "--output",
        str(base / "plan"),
        "--replay",
        "--no-charts",
        tmp=base / "tmp",
        PYSPARK_SUBMIT_ARGS=PLANNER_SUBMIT_ARGS,
    )
    try:
        stdout, stderr, code = finished(run, base / "tmp", 600)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(10)
    return Plan(base / "plan", base / "tmp", stdout, stderr, code)


def planned(stdout: str, stderr: str, returncode: int, out: Path) -> None:
    """The planner ran, replayed, and wrote what it says it wrote."""
    assert returncode == 0, stderr[-4000:]
    assert "No module named" not in stderr
    assert "tenant APIs held under today's quotas" in verdict(stdout)
    assert (out / "recommended-quotas.yaml").is_file() and (out / "report.html").is_file()
    assert any(name.endswith(".parquet") for name in os.listdir(out / "replay"))


def verdict(stdout: str) -> str:
    """The replay's line of the planner's output."""
    return next(line for line in stdout.splitlines() if line.startswith("replay under"))


def quotas(out: Path) -> list[dict]:
    return yaml.safe_load((out / "recommended-quotas.yaml").read_text())["quotas"]


def test_analyze_replays_on_local_star_as_a_user_runs_it(local_plan):
    """What a user reads after ``analyze --replay`` on the default master: the steps as they ran, the table (the
    fleet default, the misbehaving tenants, the churner named an offender, each key's comment above it), and the
    replay's verdict: the held tenants relieved by the recommended table. Nothing left in the temporary folder."""
    planned(local_plan.stdout, local_plan.stderr, local_plan.returncode, local_plan.out)
    # Spark's JVM (here driver and executor both) ends after the planner, when its standard input closes, and its
    # shutdown hooks then remove what it made (artifacts-*, native libraries): gone once it has ended, or never.
    wait_until(lambda: os.listdir(local_plan.tmp) == [], 60, "the temporary folder emptied as Spark's JVM ends")
    steps = [line.split(" (")[0] for line in local_plan.stderr.splitlines() if line.startswith("analyze [")]
    assert steps[0] == "analyze [1/6] reading the usage log" and steps[-1] == "analyze [6/6] report", steps
    items = {tuple(it["entity"].items()): it for it in quotas(local_plan.out)}
    assert "producer_byte_rate" in items[(("user", "<default>"), ("client-id", "<default>"))]  # the fleet default
    assert "producer_byte_rate" in items[(("user", "hog"), ("client-id", "bulk-loader"))]
    assert "controller_mutation_rate" in items[(("user", "ops"), ("client-id", "topic-creator"))]
    assert "producer_ids_rate" in items[(("user", "churner"),)]
    assert "connection_creation_rate" in items[(("ip", "203.0.113.66"),)]
    text = (local_plan.out / "recommended-quotas.yaml").read_text()
    default = text[text.index("  - entity: {user: <default>, client-id: <default>}") :].splitlines()
    assert default[1].startswith("    # fleet default: p90 of the "), default[:3]
    churner = text[text.index("  - entity: {user: churner}") :].splitlines()
    assert churner[1].startswith("    # offender: "), churner[:3]  # 3 tenants' log: the held ones under the default
    held = re.search(
        r"replay under the recommended table: (\d+) tenant APIs held under today's quotas \(([\d,]+) s\), (\d+) "
        r"under the candidate \(([\d,]+) s\)",
        verdict(local_plan.stdout),
    )
    assert held, verdict(local_plan.stdout)
    today_s, candidate_s = (float(held[i].replace(",", "")) for i in (2, 4))
    assert int(held[1]) >= 2 and today_s > 0 and candidate_s < today_s, held[0]
    report = (local_plan.out / "report.html").read_text()
    assert "Replay under the recommended table" in report and "user=steady client-id=over-quota" in report


class SparkCluster:
    """A standalone Spark master and one worker, from the installed pyspark's ``spark-class``, on free loopback
    ports; the worker's executors start the bare venv's python3."""

    def __init__(self, installed: Installed, folder: Path) -> None:
        home = next((installed.venv / "lib").glob("python3*/site-packages/pyspark"))
        self.port, self.ui = free_port(), free_port()
        self.procs: list[subprocess.Popen] = []
        self.log = folder / "daemons.log"
        for sub in ("tmp", "work", "local"):
            (folder / sub).mkdir(parents=True)
        env = installed.env(
            folder / "tmp",
            SPARK_HOME=str(home),
            SPARK_WORKER_DIR=str(folder / "work"),
            SPARK_LOCAL_DIRS=str(folder / "local"),
            SPARK_DAEMON_JAVA_OPTS=SMALL_JOB_JVM,
        )
        self.env, self.home, self.folder = env, home, folder

    @property
    def master(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, *argv: str) -> None:
        with open(self.log, "a") as log:
            self.procs.append(
                subprocess.Popen(
                    [str(self.home / "bin" / "spark-class"), *argv],
                    env=self.env,
                    cwd=self.folder,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )

    def launch(self) -> None:
        self._start(
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.ui),
        )

    def wait_ready(self) -> None:
        """The worker started once the master listens (it would otherwise retry every 5-15 s), and registered."""
        wait_for_port(self.port, timeout=180)
        self._start(
            "org.apache.spark.deploy.worker.Worker",
            "--host",
            "127.0.0.1",
            "--webui-port",
            str(free_port()),
            "--cores",
            "2",
            "--memory",
            "1g",
            self.master,
        )
        wait_until(self._worker_alive, 180, "the Spark worker registered with the master", interval=0.5)

    def _worker_alive(self) -> bool:
        assert all(p.poll() is None for p in self.procs), self.log.read_text()[-4000:]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=2) as answer:
                return json.load(answer).get("aliveworkers", 0) >= 1
        except OSError:
            return False
        except ValueError:  # the master's UI page itself: asked before the UI's /json handler was attached
            return False

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


# A few rows of usage log: Spark's default of 200 shuffle partitions per stage on a standalone cluster (the planner
# sets fewer only for local masters) is 200 tasks of nothing each; an operator sets the same with spark-submit.
# Every JVM of the run (master, worker, driver, executor) with the client compiler alone and the serial collector, as
# the demo's planner runs (demo/planner.py): a job this small ends before the optimising compiler pays back.
SMALL_JOB = (
    "--conf spark.sql.shuffle.partitions=4 --conf spark.default.parallelism=2 "
    f"--driver-java-options '{SMALL_JOB_JVM}' --conf 'spark.executor.extraJavaOptions={SMALL_JOB_JVM}' pyspark-shell"
)


def test_analyze_replays_on_a_standalone_cluster(installed, usage_log, local_plan, tmp_path):
    """The planner with --replay on a standalone Spark cluster (a master and a worker started from the installed
    pyspark), whose executors run a Python that has nothing installed: the replay's code reaches them only in the zip
    the planner ships. The same table and the same verdict as on ``local[*]`` (:func:`local_plan`). Nothing is left
    in the temporary folder."""
    cluster = SparkCluster(installed, tmp_path / "cluster")
    run = None
    try:
        cluster.launch()
        cluster.wait_ready()
        run = installed.start(
            "analyze",
            "--input",
            str(usage_log),
            "--output",
            str(tmp_path / "cluster-plan"),
            "--replay",
            "--master",
            cluster.master,
            tmp=tmp_path / "tmp-cluster",
            PYSPARK_SUBMIT_ARGS=SMALL_JOB,
        )
        result = finished(run, tmp_path / "tmp-cluster", 600)
    finally:
        if run is not None and run.poll() is None:
            run.kill()
            run.wait(10)
        cluster.stop()
    out = tmp_path / "cluster-plan"
    planned(*result, out)
    charts = [name for name in os.listdir(out) if name.startswith("chart-") and name.endswith(".svg")]
    assert charts and all(name in (out / "report.html").read_text() for name in charts)  # matplotlib, the extra's
    assert os.listdir(tmp_path / "tmp-cluster") == [], "left in the temporary folder of the cluster run"
    assert quotas(out) == quotas(local_plan.out)
    assert verdict(result[0]).split("; per tenant")[0] == verdict(local_plan.stdout).split("; per tenant")[0]
