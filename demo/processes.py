"""The processes the demo starts (Tansu, the proxy, the quota planner) and the ports they need.

Before anything starts, every port is checked free (:func:`check_ports`), naming the process that holds one when
it is not. A child counts as ready only when the listening socket on its port is its own (read from ``/proc``; on
a system without it: the child is alive, the port was free before and now answers), so the demo never talks to a
broker or proxy it did not start; Tansu must also advertise the address it was given (:func:`check_advertised`).
Every child runs in its own session, so Ctrl-C in the terminal reaches the demo only, and :meth:`Children.stop_all`
stops each child's whole process group (the planner's JVM too) on every way out of the demo.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

from config.model import Address

_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's "st" column
_PROC = Path("/proc")


class DemoError(Exception):
    """Something that stops the demo, said in words for its user."""


def _listening_inodes(port: int) -> set[str] | None:
    """Inodes of the TCP sockets listening on ``port`` (any address); None without ``/proc/net``."""
    found, readable = set(), False
    for table in ("tcp", "tcp6"):
        try:
            lines = (_PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        readable = True
        for line in lines:
            fields = line.split()
            if fields[3] == _LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.add(fields[9])
    return found if readable else None


def _pids_holding(inodes: set[str]) -> set[int]:
    """The processes (of those this user may look into) with one of these sockets open."""
    wanted, pids = {f"socket:[{inode}]" for inode in inodes}, set()
    for proc in _PROC.glob("[0-9]*"):
        try:
            if any(os.readlink(fd) in wanted for fd in (proc / "fd").iterdir()):
                pids.add(int(proc.name))
        except OSError:  # gone, or another user's
            continue
    return pids


def _command(pid: int) -> str:
    try:
        return " ".join((_PROC / str(pid) / "cmdline").read_bytes().decode(errors="replace").split())
    except OSError:
        return "?"


def holder(port: int) -> str:
    """Who listens on ``port``, for a message: ``pid 1234 (java -jar ...)``, as far as this user can see."""
    inodes = _listening_inodes(port)
    if inodes is None:
        return "another process (find it with `lsof -iTCP:%d -sTCP:LISTEN`)" % port
    pids = _pids_holding(inodes)
    if not pids:
        return f"a process this user cannot see (find it with `sudo ss -ltnp 'sport = :{port}'`)"
    return ", ".join(f"pid {pid} ({_command(pid)[:120]})" for pid in sorted(pids))


def _bindable(address: Address) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in address.host else socket.AF_INET) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Tansu and the proxy bind
        try:
            sock.bind((address.host, address.port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise DemoError(f"cannot use {address}: {exc.strerror}") from exc
    return True


def check_ports(needed: dict[str, Address], config_path: str) -> None:
    """Raise a :class:`DemoError` naming every needed port that something else already listens on."""
    taken = [
        f"  {address} ({what}) is in use by {holder(address.port)}"
        for what, address in needed.items()
        if not _bindable(address)
    ]
    if taken:
        raise DemoError(
            "\n".join(
                [
                    "the demo cannot start: a port it needs is taken",
                    *taken,
                    "The demo talks only to the broker and the proxy it starts itself. Stop that process, or copy",
                    f"{config_path}, change the ports in it and run: python -m demo --config <your copy>",
                ]
            )
        )


def _alive(proc: subprocess.Popen) -> bool:
    return proc.poll() is None


def _family(pid: int) -> set[int]:
    """``pid`` and its descendants."""
    children: dict[int, list[int]] = {}
    for stat in _PROC.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    family, todo = set(), [pid]
    while todo:
        family.add(todo[-1])
        todo.extend(children.get(todo.pop(), ()))
    return family


def owns(proc: subprocess.Popen, address: Address) -> bool | None:
    """Whether the socket listening on ``address``'s port is ``proc``'s (or a descendant's); None: not listening."""
    inodes = _listening_inodes(address.port)
    if inodes is None:  # no /proc: it listens, and the port was free when the child started
        try:
            socket.create_connection((address.host, address.port), timeout=0.2).close()
        except OSError:
            return None
        return True
    if not inodes:
        return None
    return bool(_pids_holding(inodes) & _family(proc.pid))


class Children:
    """The processes the demo started, each in its own session (its process group), stopped on every way out."""

    def __init__(self, log_dir: str) -> None:
        self.log_dir = Path(log_dir)
        self.started: list[tuple[str, subprocess.Popen]] = []

    def start(self, what: str, argv: list[str], log: str | None = None, **popen) -> subprocess.Popen:
        if log is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            with open(self.log_dir / log, "wb") as out:
                popen.setdefault("stdout", out)
                popen.setdefault("stderr", subprocess.STDOUT)
                proc = subprocess.Popen(argv, start_new_session=True, **popen)
        else:
            proc = subprocess.Popen(argv, start_new_session=True, **popen)
        self.started.append((what, proc))
        return proc

    def log_tail(self, log: str, lines: int = 5) -> str:
        try:
            tail = (self.log_dir / log).read_text(errors="replace").strip().splitlines()[-lines:]
        except OSError:
            return ""
        return "".join(f"\n  | {line}" for line in tail)

    def wait_listening(
        self, what: str, proc: subprocess.Popen, addresses: list[Address], log: str | None = None, timeout_s: float = 30
    ) -> None:
        """Until ``proc`` itself listens on every address; a :class:`DemoError` saying why when it does not."""
        deadline = time.monotonic() + timeout_s
        waiting = list(addresses)
        while waiting:
            if not _alive(proc):
                raise DemoError(
                    f"{what} exited (code {proc.returncode}) before listening on "
                    f"{', '.join(map(str, waiting))}" + (self.log_tail(log) if log else "")
                )
            found = owns(proc, waiting[0])
            if found is False:
                raise DemoError(
                    f"{waiting[0]} is held by {holder(waiting[0].port)}, not by {what} (pid {proc.pid}) "
                    "that the demo started; it talks to no other"
                )
            if found:
                waiting.pop(0)
                continue
            if time.monotonic() > deadline:
                raise DemoError(
                    f"{what} (pid {proc.pid}) did not listen on {waiting[0]} within {timeout_s:.0f} s"
                    + (self.log_tail(log) if log else "")
                )
            time.sleep(0.05)

    def stop_all(self) -> None:
        """Stop every child, the newest first: SIGTERM to its process group, SIGKILL after a grace period."""
        for _, proc in reversed(self.started):
            _signal_group(proc, signal.SIGTERM)
        for _, proc in reversed(self.started):
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait(5)
            _signal_group(proc, signal.SIGKILL)  # whatever it left in its group (the planner's JVM)
        self.started.clear()


def _signal_group(proc: subprocess.Popen, sig: signal.Signals) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def check_advertised(broker: Address, expected: Address) -> None:
    """Raise a :class:`DemoError` unless the broker at ``broker`` advertises ``expected`` (the proxy's listener)
    and only it, as a sidecar's broker does; asked with one Metadata v1 request."""
    from proxy.codec.apis import METADATA
    from proxy.codec.header import encode_request_header, frame
    from proxy.codec.messages import decode_response, encode_request, new_request

    request = encode_request_header(METADATA, 1, 1, "demo-check") + encode_request(
        METADATA, 1, new_request(METADATA, 1, topics=[])
    )
    try:
        with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
            sock.sendall(frame(request))
            size = struct.unpack(">i", _read(sock, 4))[0]
            body = _read(sock, size)
    except OSError as exc:
        raise DemoError(f"the broker on {broker} did not answer a Metadata request: {exc}") from exc
    brokers = sorted(f"{b.host}:{b.port}" for b in decode_response(METADATA, 1, body[4:]).brokers)
    if brokers != [str(expected)]:
        raise DemoError(
            f"the broker on {broker} advertises {', '.join(brokers) or 'no broker'}, not the proxy's "
            f"{expected}: clients would bypass the proxy"
        )


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("connection closed")
        data += chunk
    return data
