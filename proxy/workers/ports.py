"""The listeners' ports, reserved once by the parent of ``workers: N`` so every worker binds the same ones."""

from __future__ import annotations

import socket

from config.model import ProxyConfig


def reserve_ports(config: ProxyConfig) -> tuple[dict[str, int], list[socket.socket]]:
    """Each listener's port bound (not listened on) with SO_REUSEPORT, so a port 0 resolves once for every worker
    and a port taken by another program is found before any worker starts. Held until the parent exits."""
    ports: dict[str, int] = {}
    held: list[socket.socket] = []
    for lc in config.listeners:
        family = socket.AF_INET6 if ":" in lc.bind.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            sock.bind((lc.bind.host, lc.bind.port))
        except OSError:
            sock.close()
            for other in held:
                other.close()
            raise
        held.append(sock)
        ports[lc.name] = sock.getsockname()[1]
    return ports, held
