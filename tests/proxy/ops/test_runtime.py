"""proxy.ops.runtime: the process, Python, build and memory-limit metrics a proxy's own registry adds."""

from prometheus_client import CollectorRegistry

from proxy.codec import accel
from proxy.ops.runtime import memory_limit_bytes, register_runtime, version


def test_a_proxy_registry_has_the_process_python_and_build_metrics():
    registry = CollectorRegistry()
    register_runtime(registry)
    get = registry.get_sample_value
    assert get("process_open_fds") > 0 and get("process_max_fds") >= get("process_open_fds")
    assert get("process_resident_memory_bytes") > 0
    assert get("python_gc_collections_total", {"generation": "0"}) is not None
    assert any(s.name == "python_info" for m in registry.collect() for s in m.samples)
    assert version() != "unknown"
    assert get("kafka_quota_proxy_build_info", {"version": version()}) == 1
    assert get("kafka_quota_proxy_codec_info", {"path": accel.LABEL}) == 1 and accel.LABEL in ("c", "python")
    assert 0 < get("kafka_quota_proxy_memory_limit_bytes") <= memory_limit_bytes(paths=())


def test_the_memory_limit_is_the_containers_when_it_has_one(tmp_path):
    host = lambda: 64e9  # noqa: E731
    v2, v1 = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    assert memory_limit_bytes(paths=(str(v2), str(v1)), host=host) == 64e9  # no cgroup file: the host's
    v1.write_text("9223372036854771712\n")  # cgroup v1's "no limit"
    assert memory_limit_bytes(paths=(str(v2), str(v1)), host=host) == 64e9
    v2.write_text("max\n")
    assert memory_limit_bytes(paths=(str(v2), str(v1)), host=host) == 64e9
    v2.write_text("536870912\n")  # a 512 MiB container
    assert memory_limit_bytes(paths=(str(v2), str(v1)), host=host) == 536870912
    v2.write_text("not a number\n")
    assert memory_limit_bytes(paths=(str(v2),), host=host) == 64e9
