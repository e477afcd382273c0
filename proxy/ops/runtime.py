"""What operators' tooling expects of any process it scrapes, added to a proxy's own registry (which, being its own,
has none of prometheus-client's default collectors):

- ``process_*`` (open and maximum file descriptors, resident and virtual memory, CPU seconds, start time) and
  ``python_*`` (``python_info``, the garbage collector's counts): prometheus-client's own collectors, reading
  /proc/self of the process that is scraped. With ``workers: N`` every worker has its own, and the parent's /metrics
  labels them ``worker`` (:mod:`proxy.workers.scrape`), so each process' file descriptors are judged against its own
  limit;
- ``kafka_quota_proxy_build_info{version}`` = 1, the running version;
- ``kafka_quota_proxy_codec_info{path}`` = 1, ``c`` where the codec's C extension reads the frames, ``python`` where
  the pure path does (:mod:`proxy.codec.accel`);
- ``kafka_quota_proxy_memory_limit_bytes``: what the processes of this proxy may use together, the container's
  memory limit (cgroup v2 ``memory.max``, or v1 ``memory.limit_in_bytes``) or, with none, the host's memory. The
  memory-pressure alert compares the processes' summed resident memory with it.
"""

from __future__ import annotations

import os
from importlib import metadata

from prometheus_client import CollectorRegistry, Gauge, GCCollector, PlatformCollector, ProcessCollector

from proxy.codec import accel
from proxy.ops.metrics import PREFIX

CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
"""Where a container's memory limit is read: cgroup v2, then v1 (the first that exists)."""


def version() -> str:
    """The installed package's version, or ``unknown`` when run from a tree that was never installed."""
    try:
        return metadata.version("kafka-quota-proxy")
    except metadata.PackageNotFoundError:
        return "unknown"


def host_memory_bytes() -> float:
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def cgroup_limit_bytes(text: str) -> float | None:
    """A cgroup memory limit file's content as bytes, or None for no limit (``max``; v1's page-rounded 2^63)."""
    value = text.strip()
    if not value or value == "max":
        return None
    limit = float(int(value))
    return None if limit >= 2.0**62 else limit


def memory_limit_bytes(paths: tuple[str, ...] = CGROUP_LIMITS, host=host_memory_bytes) -> float:
    """The container's memory limit if it has one below the host's memory, else the host's memory."""
    limit = host()
    for path in paths:
        try:
            with open(path) as f:
                found = cgroup_limit_bytes(f.read())
        except (OSError, ValueError):
            continue
        return limit if found is None else min(found, limit)
    return limit


def register_runtime(registry: CollectorRegistry) -> None:
    """The process, Python, build and memory-limit metrics, on ``registry`` (a proxy's own: never
    prometheus-client's global one, which has the first three already)."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    Gauge(
        f"{PREFIX}_build_info",
        "1, labelled with the running kafka-quota-proxy version.",
        ["version"],
        registry=registry,
    ).labels(version()).set(1)
    Gauge(
        f"{PREFIX}_codec_info",
        "1, labelled with the codec path that reads the frames: c (the C extension) or python.",
        ["path"],
        registry=registry,
    ).labels(accel.LABEL).set(1)
    limit = Gauge(
        f"{PREFIX}_memory_limit_bytes",
        "Memory the proxy's processes may use together: the "
        "container's cgroup memory limit, else the host's memory; read when scraped.",
        registry=registry,
    )
    limit.set_function(memory_limit_bytes)
