"""The configuration's JSON Schema (``kafka-quota-proxy schema``): a valid draft 2020-12 schema, shipped in the
package as generated, accepting every configuration the project ships and refusing an unknown key anywhere, as the
loader does."""

import glob
import json
import os
import re
import subprocess
import sys

import jsonschema
import pytest
import yaml

from config.loader import parse_config
from config.schema import config_schema, schema_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIPPED = os.path.join(ROOT, "config", "kafka-quota-proxy.schema.json")


def shipped_configs() -> dict[str, dict]:
    """Every configuration the repository ships: the demo's, compose's, the Kubernetes ones (a ConfigMap's
    proxy.yaml text, or a proxy.yaml file a kustomization makes the ConfigMap of), and any under examples/ and
    config/ (a YAML file there with an upstream or listeners key)."""
    found = {}

    def add(name: str, text: str, only_proxy_configs: bool = False) -> None:
        # a Kubernetes file's placeholder for the pod's broker id (__BROKER_ID__, ${env:KAFKA_NODE_ID}): broker 0
        text = re.sub(r"\$\{env:[A-Za-z_][A-Za-z0-9_]*\}", "0", text.replace("__BROKER_ID__", "0"))
        for i, doc in enumerate(yaml.safe_load_all(text)):
            if not isinstance(doc, dict):
                continue
            if doc.get("kind") == "ConfigMap" and "proxy.yaml" in doc.get("data", {}):
                add(f"{name} proxy.yaml", doc["data"]["proxy.yaml"])
            elif not only_proxy_configs or "upstream" in doc or "listeners" in doc:
                found[f"{name}[{i}]"] = doc

    for path in ["demo/demo.yaml", *sorted(glob.glob("deploy/compose/*.yaml", root_dir=ROOT))]:
        add(path, open(os.path.join(ROOT, path), encoding="utf-8").read())
    for pattern in ("deploy/k8s/**/*.yaml", "examples/**/*.yaml", "config/*.yaml"):
        for path in sorted(glob.glob(pattern, root_dir=ROOT, recursive=True)):
            text = open(os.path.join(ROOT, path), encoding="utf-8").read()
            add(path, text, only_proxy_configs=os.path.basename(path) != "proxy.yaml")
    return found


CONFIGS = shipped_configs()
VALIDATOR = jsonschema.Draft202012Validator(config_schema())


def test_the_schema_is_a_valid_draft_2020_12_schema_and_the_shipped_file_is_todays():
    jsonschema.Draft202012Validator.check_schema(config_schema())
    with open(SHIPPED, encoding="utf-8") as f:
        assert f.read() == schema_text(), "regenerate: kafka-quota-proxy schema > config/kafka-quota-proxy.schema.json"


def test_the_command_prints_it():
    done = subprocess.run([sys.executable, "-m", "proxy.cli", "schema"], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == config_schema()


def test_every_shipped_configuration_is_valid_under_the_schema():
    assert len(CONFIGS) >= 6 and any("k8s" in path for path in CONFIGS), sorted(CONFIGS)
    for path, raw in CONFIGS.items():
        errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in VALIDATOR.iter_errors(raw)]
        assert not errors, (path, errors)


@pytest.mark.parametrize(
    "where,key",
    [
        ((), "extra"),
        (("settings",), "quota.window.nums"),
        (("listeners", 0), "colour"),
        (("upstream",), "bootstrap_server"),
        (("quotas", 0), "producer_byte_rates"),
        (("quotas", 0, "entity"), "group"),
        (("volume_usage",), "sorce"),
        (("dynamic_config",), "topics"),
    ],
)
def test_an_unknown_key_is_refused_by_the_schema_as_by_the_loader(where, key):
    raw = {
        "upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
        "listeners": [{"name": "PLAIN", "bind": "127.0.0.1:19092"}],
        "settings": {"quota.window.num": 11},
        "quotas": [{"entity": {"user": "alice"}, "producer_byte_rate": 1024}],
        "volume_usage": {"source": "topic"},
        "dynamic_config": {"topic": "cfg"},
    }
    parse_config(raw)  # valid as it is
    assert not list(VALIDATOR.iter_errors(raw))
    target = raw
    for step in where:
        target = target[step]
    target[key] = 1
    errors = list(VALIDATOR.iter_errors(raw))
    assert errors and any(key in e.message for e in errors), [e.message for e in errors]
    with pytest.raises(Exception, match=key.replace(".", r"\.")):
        parse_config(raw)


def test_env_references_are_valid_where_the_loader_takes_them():
    """${env:NAME} (the loader expands it) stands for a number, a boolean or an address; a malformed one does not."""
    raw = {
        "upstream": {"bootstrap_servers": ["${env:BROKER}"], "own_clients": {"bootstrap_servers": ["h:9094"]}},
        "listeners": [{"name": "PLAIN", "bind": "127.0.0.1:19092", "internal": "${env:INTERNAL}"}],
        "settings": {"quota.window.num": "${env:WINDOWS}"},
    }
    assert not list(VALIDATOR.iter_errors(raw))
    raw["settings"]["quota.window.num"] = "${env:1WINDOWS}"
    assert list(VALIDATOR.iter_errors(raw))
