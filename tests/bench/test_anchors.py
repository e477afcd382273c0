"""The anchor benchmarks' own logic (bench/anchors_*.py), without running a broker: what a second of a client's
acknowledgements counts as, the bounded log dir the Strimzi comparison fills, the plugin fetched into the cache, and
the exit status when a claimed target is missed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import anchors_byte_rate as byte_rate
from bench.anchors_common import Verdicts

ROOT = Path(__file__).resolve().parent.parent.parent
QUOTA = 1000


def series(events):
    s = byte_rate.Series()
    s.events = list(events)
    return s


def test_figures_count_from_the_first_acknowledgement_and_leave_the_first_window_span_out():
    """A client whose first ack comes 5 s into the phase (a JVM starting) is judged on its own seconds: a burst of
    10 x quota in its first second (a fresh quota), then one quota a second; achieved 1.0 and every second in band,
    the burst and the wait before the first ack left out."""
    t0 = 100.0
    events = [(t0 + 5.2, 10 * QUOTA)] + [(t0 + 5.5 + i, QUOTA) for i in range(1, 30)]
    f = byte_rate.figures(series(events), t0, 35, QUOTA)
    assert f["achieved"] == pytest.approx(1.0)
    assert f["in_band"] == 1.0
    assert f["seconds"][0] == 10.0 and len(f["seconds"]) == 29  # 105.2 s to the end, 135 s


def test_stop_and_go_is_out_of_band_and_its_pause_is_the_longest_gap():
    """Kafka's stop-and-go: 4 x quota every 4 s averages 1.0 x but no second is within 0.5-1.5 x, and the longest
    pause between acks is the 4 s gap."""
    t0 = 0.0
    events = [(0.5, 10 * QUOTA)] + [(t + 0.5, 4 * QUOTA) for t in range(4, 60, 4)]
    f = byte_rate.figures(series(events), t0, 60, QUOTA)
    assert f["in_band"] == 0.0
    assert f["pause_s"] == pytest.approx(4.0)
    assert f["mean"] == pytest.approx(1.0)
    assert f["achieved"] == pytest.approx(1.0, abs=0.02)


def test_a_missed_target_makes_the_exit_status_non_zero(capsys):
    verdicts = Verdicts()
    verdicts.check("met", True, "1.00")
    assert verdicts.exit_code() == 0
    verdicts.check("smoothing off within 0.03 of Kafka", False, "proxy 1.12 vs Kafka 0.57")
    assert verdicts.exit_code() == 1
    assert "MISSED smoothing off within 0.03 of Kafka: proxy 1.12 vs Kafka 0.57" in capsys.readouterr().out


def test_a_duration_shorter_than_the_first_window_span_is_refused():
    result = subprocess.run(
        [sys.executable, "bench/anchors_byte_rate.py", "--duration", "5"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "--duration must be more than 12 s" in result.stderr


def test_a_fetched_plugin_is_found_in_the_cache_without_maven(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import fetch_kafka
    finally:
        sys.path.pop(0)
    monkeypatch.setenv("KQP_KAFKA_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    with pytest.raises(fetch_kafka.SetupError, match="mvn not found"):
        fetch_kafka.fetch_jar("io.strimzi", "kafka-quotas-plugin", "0.3.1")
    home = tmp_path / "kafka-quotas-plugin-0.3.1"
    (home / "libs").mkdir(parents=True)
    (home / ".complete").write_text("kafka-quotas-plugin-0.3.1.jar\n")
    assert fetch_kafka.fetch_jar("io.strimzi", "kafka-quotas-plugin", "0.3.1") == home / "libs"


def test_the_bounded_log_dir_is_a_filesystem_of_the_size_asked_holding_what_was_there(tmp_path):
    """The Strimzi comparison runs each broker with a tmpfs over its log dir (a user namespace, no root): the
    process sees a filesystem of the size asked, with the files formatting wrote there before."""
    from bench.anchors_volume import bounded_disk

    if subprocess.run(["unshare", "-Urm", "true"], capture_output=True).returncode != 0:
        pytest.skip("user namespaces are not allowed here: bench/anchors_volume.py cannot bound a log dir")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "meta.properties").write_text("node.id=1\n")
    probe = (
        "import os, sys; d = sys.argv[2].rsplit('/', 1)[0] + '/data'; st = os.statvfs(d); "
        "print(st.f_blocks * st.f_frsize, open(d + '/meta.properties').read().strip())"
    )
    command = bounded_disk(16)([sys.executable, "-c", probe, "kafka.Kafka", str(tmp_path / "server.properties")])
    result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(16 * 2**20), "node.id=1"]
    assert os.statvfs(tmp_path / "data").f_blocks * os.statvfs(tmp_path / "data").f_frsize != 16 * 2**20


def test_achieved_is_the_rate_of_a_staircase_whatever_its_phase():
    """Kafka's stop-and-go: 11 x quota every 11 s. Over 49 s the mean of the seconds is 0.90 or 1.12 x as a burst
    falls just outside or inside the end; the slope of the cumulative bytes stays within 0.02 of 1.0 for every
    phase."""
    means = []
    for phase in range(11):
        events = [(0.5, 10 * QUOTA)] + [(t + 0.5, 11 * QUOTA) for t in range(11 + phase, 61, 11)]
        f = byte_rate.figures(series(events), 0.0, 61, QUOTA)
        assert f["achieved"] == pytest.approx(1.0, abs=0.02), phase
        means.append(f["mean"])
    assert max(means) - min(means) > 0.2
