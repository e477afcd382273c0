"""This proxy's id: what names it on the usage topic (``quota.scope: cluster``) and on every record of its usage log."""

from __future__ import annotations

import socket
from collections.abc import Iterable

from config.typed_settings import Settings


def default_id(first_port: int) -> str:
    """A proxy's id when ``quota.cluster.id`` is not set: the host name and its first listener's port (the workers of
    one proxy share both, so they share the id)."""
    return f"{socket.gethostname()}:{first_port}"


def proxy_id(settings: Settings, listener_ports: Iterable[int]) -> str:
    """``quota.cluster.id`` when set, else :func:`default_id` of the first of ``listener_ports`` (0 if none); the
    ports are read only when the id is not set."""
    return settings.quota_cluster_id or default_id(next(iter(listener_ports), 0))
