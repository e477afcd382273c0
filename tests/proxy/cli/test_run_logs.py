"""What an operator sees on the terminal in the first minute: ``--version``, the start-up line, and a warning while
the broker has never answered, from ``kafka-quota-proxy`` run as a user runs it (a subprocess, its stderr read);
``--log-format json`` parsed line by line, with a connection's context fields as keys."""

from __future__ import annotations

import json
import os
import platform
import queue
import signal
import socket
import subprocess
import sys
import threading
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path

import yaml

from proxy.codec.accel import PATH, PURE_ENV
from proxy.connection.compiled import PATH as CONNECTION_PATH
from quota.primitives.rate import RATE_PATH
from tests.harness import free_port, wait_for_port

COMMAND = str(Path(sys.executable).parent / "kafka-quota-proxy")  # the console script pip installed


def closed_port() -> int:
    """A port nothing listens on (bound and closed again: connecting is refused)."""
    return free_port()


@contextmanager
def running(tmp_path, *options: str):
    """The proxy in front of a closed port; yields (listener port, next_line(timeout) for stderr lines)."""
    port = free_port()
    config = {
        "upstream": {"bootstrap_servers": [f"127.0.0.1:{closed_port()}"]},
        "listeners": [{"name": "PLAIN", "bind": f"127.0.0.1:{port}"}],
        "metrics": {"bind": "127.0.0.1:0"},
        "dynamic_config": {"enabled": False},
        "quotas": [
            {"entity": {"user": "<default>"}, "producer_byte_rate": 1048576},
            {
                "entity": {"user": "alice", "client-id": "etl"},
                "producer_byte_rate": 2097152,
                "consumer_byte_rate": 4194304,
            },
        ],
    }
    path = tmp_path / "proxy.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.Popen(
        [COMMAND, "run", "--config", str(path), *options], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    lines: queue.Queue = queue.Queue()
    seen: list[str] = []
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True).start()

    def next_matching(predicate, timeout: float = 30.0) -> str:
        while True:
            try:
                line = lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no such line within {timeout} s; seen:\n{''.join(seen)}") from None
            seen.append(line)
            if predicate(line):
                return line

    try:
        yield port, next_matching, seen
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        while not lines.empty():
            seen.append(lines.get())


def test_version_names_the_package_python_and_the_compiled_paths():
    done = subprocess.run([COMMAND, "--version"], capture_output=True, text=True, check=True)
    expected = (
        f"kafka-quota-proxy {version('kafka-quota-proxy')} (Python {platform.python_version()}, rate: {RATE_PATH}, "
        f"codec: {PATH}, connection: {CONNECTION_PATH})"
    )
    assert done.stdout.strip() == expected
    pure = subprocess.run(
        [COMMAND, "--version"], capture_output=True, text=True, check=True, env={**os.environ, PURE_ENV: "1"}
    )
    # one line however long (argparse's own version action wrapped it to the terminal's width)
    assert pure.stdout.count("\n") == 1 and pure.stdout.endswith(
        f"rate: pure Python ({PURE_ENV} is set), codec: pure Python ({PURE_ENV} is set), "
        f"connection: pure Python ({PURE_ENV} is set))\n"
    )


def test_start_up_says_what_is_configured_and_warns_while_the_broker_never_answers(tmp_path):
    with running(tmp_path) as (port, next_line, _):
        start = next_line(lambda line: " starting: " in line)
        assert f"kafka-quota-proxy {version('kafka-quota-proxy')}" in start
        assert f"listeners: PLAIN 127.0.0.1:{port} (sidecar)" in start
        assert "quotas: consumer_byte_rate x1, producer_byte_rate x2" in start
        assert "dynamic config: off" in start and "workers: 1" in start and "usage log: off" in start
        warning = next_line(lambda line: "WARNING" in line and "no broker has answered" in line)
        upstream = warning.split("503: ", 1)[1]
        assert "since start-up" in warning and "ConnectionRefusedError" in upstream
        assert upstream.startswith("127.0.0.1:"), warning


def test_json_lines_parse_and_carry_a_connections_context(tmp_path):
    with running(tmp_path, "--log-format", "json") as (port, next_line, seen):
        start = json.loads(next_line(lambda line: "starting" in line))
        assert set(start) == {"time", "level", "logger", "message"} and start["level"] == "INFO"
        assert start["time"].endswith("Z") and "T" in start["time"]
        warning = json.loads(next_line(lambda line: "no broker has answered" in line))
        assert warning["level"] == "WARNING" and warning["logger"] == "proxy.ops.readiness"
        wait_for_port(port)  # (its own connection is logged too)
        client = socket.create_connection(("127.0.0.1", port), timeout=10)
        peer = f"127.0.0.1:{client.getsockname()[1]}"
        try:
            dial = json.loads(next_line(lambda line: "cannot reach broker" in line and peer in line))
        finally:
            client.close()
        assert dial["listener"] == "PLAIN" and dial["client"] == peer
        assert dial["broker"].startswith("127.0.0.1:") and dial["broker"] in dial["message"]
    for line in seen:  # every line, to the last one written at shutdown, is one JSON object
        assert isinstance(json.loads(line), dict), line
