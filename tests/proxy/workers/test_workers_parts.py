"""The pieces of ``workers: N`` that need no process: the setting's bounds, the frames of the parent-worker link,
the parent's merge of its workers' metrics, the configuration a worker runs, and the parent's port reservation."""

from __future__ import annotations

import asyncio
import socket

import pytest

from config.errors import ConfigError
from config.loader import parse_config
from proxy.workers.frames import MAX_FRAME_BYTES, USAGE, FrameError, pack, read_frame
from proxy.workers.ports import reserve_ports
from proxy.workers.scrape import labelled, merge, workers_exposition
from proxy.workers.worker import WorkerSpec, worker_config


def config(**settings):
    return parse_config(
        {
            "upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
            "listeners": [{"name": "PLAINTEXT", "bind": "127.0.0.1:0"}],
            "metrics": {"bind": "127.0.0.1:9464"},
            "settings": settings,
        }
    )


def test_workers_and_their_sync_interval_are_settings_checked_at_load():
    assert config().settings.workers == 1
    assert config().settings.quota_workers_sync_ms == 20
    assert config(workers=4).settings.workers == 4
    with pytest.raises(ConfigError, match=r"settings\.workers.*between 1 and 256, got 0"):
        config(workers=0)
    with pytest.raises(ConfigError, match=r"settings\.workers.*expected an integer"):
        config(workers=1.5)
    with pytest.raises(ConfigError, match=r"settings\.quota\.workers\.sync\.ms.*between 5 and 10000"):
        config(**{"quota.workers.sync.ms": 4})


def feed(data: bytes):
    async def read():
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        frames = []
        while (got := await read_frame(reader)) is not None:
            frames.append(got)
        return frames

    return asyncio.run(read())


def test_frames_round_trip_and_a_bad_one_is_an_error():
    assert feed(pack(USAGE, b"abc") + pack(b"R", b"")) == [(USAGE, b"abc"), (b"R", b"")]
    with pytest.raises(FrameError, match="unknown frame kind"):
        feed(pack(b"Z", b"x"))
    with pytest.raises(FrameError, match="outside"):
        feed((MAX_FRAME_BYTES + 1).to_bytes(4, "big"))
    with pytest.raises(FrameError, match="inside a frame"):
        feed(pack(USAGE, b"abc")[:-1])


def test_each_sample_gets_its_worker_label_and_each_family_one_head():
    assert labelled('m_total{a="b"} 1.0', "3") == 'm_total{worker="3",a="b"} 1.0'
    assert labelled("m 2.0", "0") == 'm{worker="0"} 2.0'
    assert labelled("m{} 2.0", "0") == 'm{worker="0"} 2.0'
    one = '# HELP m_total Doc.\n# TYPE m_total counter\nm_total{l="x"} 1.0\n# HELP g G.\n# TYPE g gauge\ng 5.0\n'
    two = '# HELP m_total Doc.\n# TYPE m_total counter\nm_total{l="x"} 2.0\n'
    assert merge([("0", one), ("1", two)]).splitlines() == [
        "# HELP m_total Doc.",
        "# TYPE m_total counter",
        'm_total{worker="0",l="x"} 1.0',
        'm_total{worker="1",l="x"} 2.0',
        "# HELP g G.",
        "# TYPE g gauge",
        'g{worker="0"} 5.0',
    ]


def test_the_parents_own_samples_are_not_labelled_and_join_the_workers_families():
    """process_* and python_* come from the parent and from every worker: one family each, the samples together (a
    family split in two places is an error to OpenMetrics parsers), only the workers' labelled."""
    parent = "# HELP process_open_fds Fds.\n# TYPE process_open_fds gauge\nprocess_open_fds 9.0\n"
    worker = "# HELP process_open_fds Fds.\n# TYPE process_open_fds gauge\nprocess_open_fds 12.0\n"
    assert workers_exposition(parent, [(0, 1), (1, 2)], [].append, lambda port: worker).decode().splitlines() == [
        "# HELP process_open_fds Fds.",
        "# TYPE process_open_fds gauge",
        "process_open_fds 9.0",
        'process_open_fds{worker="0"} 12.0',
        'process_open_fds{worker="1"} 12.0',
    ]


def test_a_worker_that_does_not_answer_is_left_out_and_counted():
    failed = []

    def fetch(port):
        if port == 2:
            raise OSError("refused")
        return "# HELP g G.\n# TYPE g gauge\ng 1.0\n"

    assert (
        workers_exposition("", [(0, 1), (1, 2)], failed.append, fetch)
        == b'# HELP g G.\n# TYPE g gauge\ng{worker="0"} 1.0\n'
    )
    assert failed == [1]


def test_a_worker_runs_on_the_resolved_ports_with_its_metrics_on_loopback():
    spec = WorkerSpec.from_json(WorkerSpec(2, 7, {"PLAINTEXT": 31000}).to_json())
    assert spec == WorkerSpec(2, 7, {"PLAINTEXT": 31000})
    mine = worker_config(config(workers=2), spec.index, spec.ports)
    assert mine.listeners[0].bind.port == 31000
    assert (mine.metrics.bind.host, mine.metrics.bind.port) == ("127.0.0.1", 0)


def test_the_parent_resolves_port_0_once_and_workers_can_share_it():
    ports, held = reserve_ports(config(workers=2))
    try:
        port = ports["PLAINTEXT"]
        assert port > 0
        listening = []
        for _ in range(2):  # two workers listening on the port the parent holds
            s = socket.create_server(("127.0.0.1", port), reuse_port=True)
            listening.append(s)
        for s in listening:
            s.close()
    finally:
        for s in held:
            s.close()
