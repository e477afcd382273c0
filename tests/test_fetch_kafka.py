"""tools/fetch_kafka.py, the set-up step that fetches Apache Kafka for the tests: a missing Java or Maven is one line
naming what to install (never a silent skip), and a finished fetch is never redone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "fetch_kafka.py"


def run(tmp_path: Path, programs: list[str], cache: Path, script: Path = SCRIPT) -> subprocess.CompletedProcess:
    """``script`` with a PATH holding only ``programs`` (links to the real ones) and its cache at ``cache``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in programs:
        real = next(Path(d) / name for d in os.environ["PATH"].split(os.pathsep) if (Path(d) / name).exists())
        (bin_dir / name).symlink_to(real)
    env = {"PATH": str(bin_dir), "KQP_KAFKA_CACHE": str(cache), "HOME": str(tmp_path)}
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60)


def test_without_maven_one_line_names_what_to_install(tmp_path):
    result = run(tmp_path, ["java"], tmp_path / "cache")
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "mvn not found: install Apache Maven" in lines[0], result.stderr


def test_without_java_one_line_names_what_to_install(tmp_path):
    result = run(tmp_path, ["mvn"], tmp_path / "cache")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "java not found: install a Java 17+ runtime" in lines[0], result.stderr


def test_a_finished_fetch_is_found_without_java_or_maven(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import fetch_kafka
    finally:
        sys.path.pop(0)
    home = tmp_path / "cache" / f"kafka-{fetch_kafka.KAFKA_VERSION}"
    (home / "libs").mkdir(parents=True)
    (home / ".complete").write_text("kafka_2.13.jar\n")
    result = run(tmp_path, [], tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(home / "libs")


def test_a_fetch_cut_short_is_done_again(tmp_path):
    """No `.complete` marker (a run killed halfway): the script does not take the folder for a finished fetch; here
    without Maven it then says so, rather than handing out a half-filled libs/."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import fetch_kafka
    finally:
        sys.path.pop(0)
    (tmp_path / "cache" / f"kafka-{fetch_kafka.KAFKA_VERSION}" / "libs").mkdir(parents=True)
    result = run(tmp_path, ["java"], tmp_path / "cache")
    assert result.returncode == 2 and "mvn not found" in result.stderr
