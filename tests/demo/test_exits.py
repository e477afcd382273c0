"""``python -m demo`` as a newcomer meets it, run as ``make demo`` runs it (a child process, real Tansu and proxy):

- another process already listens on one of the ports the demo needs (the broker port 29092 of Confluent's
  docker-compose examples is a common one): the demo exits non-zero at once, names the port and the process holding
  it, and never connects to that listener (once, its clients went to a foreign broker, bypassing the proxy);
- SIGINT (Ctrl-C) or SIGTERM while it runs its storms: it exits within seconds, saying so, and leaves no child
  process and no listening port behind.

No Tansu runs in the first case (the demo stops before it starts anything); the others run the demo's own.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from tests.harness import free_port

pytestmark = [pytest.mark.integration, pytest.mark.long_running(seconds=20)]

REPO = Path(__file__).parents[2]


class Demo:
    """``python -m demo --config ...`` in a child process; its output collected line by line."""

    def __init__(self, tmp_path: Path, ports: dict[str, int]) -> None:
        raw = yaml.safe_load((REPO / "demo" / "demo.yaml").read_text())
        raw["upstream"]["bootstrap_servers"] = [f"127.0.0.1:{ports['broker']}"]
        raw["listeners"][0]["bind"] = f"127.0.0.1:{ports['proxy']}"
        raw["metrics"]["bind"] = f"127.0.0.1:{ports['metrics']}"
        raw["usage_log"]["dir"] = str(tmp_path / "usage")
        config = tmp_path / "demo.yaml"
        config.write_text(yaml.safe_dump(raw))
        self.ports = ports
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "demo", "--config", str(config), "--seconds", "60"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self.seen: set[int] = set()  # every descendant seen while it ran
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for_line(self, prefix: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(line.startswith(prefix) for line in self.lines):
            self.seen |= descendants(self.proc.pid)
            assert self.proc.poll() is None, f"the demo exited before {prefix!r}:\n{self.output}"
            assert time.monotonic() < deadline, f"no {prefix!r} line in {timeout_s} s:\n{self.output}"
            time.sleep(0.1)  # a bounded condition wait that also watches the demo's processes
        self.seen |= descendants(self.proc.pid)

    def wait(self, timeout_s: float) -> int:
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the demo still runs {timeout_s} s later:\n{self.output}")
        self._reader.join(5)
        return code

    def kill_all(self) -> None:
        """Whatever the demo under test left behind (the old demo did), so that one failing test leaks nothing."""
        self.seen |= descendants(self.proc.pid)
        for pid in self.seen | {self.proc.pid}:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(10)


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            children.setdefault(int(stat.read_text().rsplit(")", 1)[1].split()[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError):
            continue
    found, todo = set(), list(children.get(pid, ()))
    while todo:
        found.add(todo[-1])
        todo.extend(children.get(todo.pop(), ()))
    return found


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


class Listener:
    """A foreign TCP listener that counts the connections it accepts."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(16)
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize("taken", ["broker", "proxy", "metrics"])
def test_a_port_in_use_stops_the_demo_before_it_talks_to_anyone(tmp_path, taken):
    ports = {"broker": free_port(), "proxy": free_port(), "metrics": free_port()}
    foreign = Listener(ports[taken])
    demo = Demo(tmp_path, ports)
    try:
        code = demo.wait(30)
        assert code == 1, demo.output
        assert f"127.0.0.1:{ports[taken]}" in demo.output and f"in use by pid {os.getpid()}" in demo.output, demo.output
        assert demo.lines[-1] == "verdict: FAIL", demo.output
        assert foreign.accepted == 0, f"the demo connected {foreign.accepted} times to the foreign listener"
        assert not any(running(pid) for pid in demo.seen), demo.output
        assert not any(listening(ports[other]) for other in ports if other != taken)
    finally:
        foreign.close()
        demo.kill_all()


@pytest.mark.parametrize("sig, during", [(signal.SIGINT, "connection storm:"), (signal.SIGTERM, "producer restarts")])
def test_a_signal_stops_the_demo_and_everything_it_started(tmp_path, sig, during):
    """SIGINT once the connection storm is over (during the topic storm), SIGTERM once the producer restarts are
    (during the disk fill, whose producer would otherwise flush for up to a minute)."""
    ports = {"broker": free_port(), "proxy": free_port(), "metrics": free_port()}
    demo = Demo(tmp_path, ports)
    try:
        demo.wait_for_line(during, 90)
        assert len(demo.seen) >= 2, "Tansu and the proxy should be running"
        demo.proc.send_signal(sig)
        code = demo.wait(20)
        name = "Ctrl-C (SIGINT)" if sig == signal.SIGINT else "SIGTERM"
        assert code == 128 + sig, demo.output
        assert f"stopped by {name} during the " in demo.output, demo.output
        assert demo.lines[-1] == "verdict: NONE", demo.output
        left = [pid for pid in demo.seen if running(pid)]
        assert not left, f"left running: {left}\n{demo.output}"
        assert not [port for port in ports.values() if listening(port)], demo.output
    finally:
        demo.kill_all()
