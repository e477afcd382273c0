"""The proxy's sockets as the operating system shows them, for what no metric says (kernel buffer sizes, bytes
queued in the kernel): found among this process's file descriptors (the proxy runs in the test's process) by their
addresses, as ``ss`` finds a socket, never through the proxy's objects. Linux only (/proc/self/fd, SIOCOUTQ)."""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import termios

SIOCINQ = termios.FIONREAD  # bytes received and not read yet
SIOCOUTQ = termios.TIOCOUTQ  # bytes written and not yet acknowledged by the peer


def tcp_sockets(peer: tuple[str, int], local: tuple[str, int] | None = None) -> list[socket.socket]:
    """Duplicates of this process's TCP sockets connected to ``peer`` (and bound at ``local``, when given), each
    once: the caller closes them (the originals stay open)."""
    found, seen = [], set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            if not target.startswith("socket:") or target in seen:  # a socket under two fds (a splice's) once
                continue
            dup = socket.socket(fileno=os.dup(int(fd)))
        except OSError:  # closed meanwhile
            continue
        try:
            if (
                dup.type == socket.SOCK_STREAM
                and dup.getpeername()[:2] == peer
                and (local is None or dup.getsockname()[:2] == local)
            ):
                found.append(dup)
                seen.add(target)
                continue
        except OSError:  # not connected (a listener)
            pass
        dup.close()
    return found


def tcp_socket(peer: tuple[str, int], local: tuple[str, int]) -> socket.socket:
    """The duplicate of this process's TCP socket from ``local`` to ``peer`` (the caller closes it)."""
    found = tcp_sockets(peer, local)
    if len(found) != 1:
        raise LookupError(f"{len(found)} TCP sockets of this process from {local} to {peer}")
    return found[0]


def queued(sock: socket.socket, which: int) -> int:
    """Bytes in ``sock``'s kernel receive queue (SIOCINQ) or send queue (SIOCOUTQ)."""
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), which, b"\0\0\0\0"))[0]
