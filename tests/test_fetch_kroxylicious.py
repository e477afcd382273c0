"""tools/fetch_kroxylicious.py, which fetches Kroxylicious for bench/anchors_kroxylicious.py: a missing JDK is one
line naming what to install, and a finished fetch is used as it is, without Java's compiler or Maven."""

from __future__ import annotations

import sys

from tests.test_fetch_kafka import ROOT, run

SCRIPT = ROOT / "tools" / "fetch_kroxylicious.py"


def fetch_kroxylicious():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import fetch_kroxylicious
    finally:
        sys.path.pop(0)
    return fetch_kroxylicious


def test_without_a_compiler_one_line_names_what_to_install(tmp_path):
    result = run(tmp_path, ["java", "mvn"], tmp_path / "cache", SCRIPT)
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "javac not found: install a Java 17+ JDK" in lines[0], result.stderr


def test_a_finished_fetch_is_run_from_the_cache(tmp_path):
    version = fetch_kroxylicious().KROXYLICIOUS_VERSION
    home = tmp_path / "cache" / f"kroxylicious-{version}"
    (home / "libs").mkdir(parents=True)
    (home / "classes").mkdir()
    (home / ".complete").write_text(f"kroxylicious-runtime-{version}.jar\n")
    result = run(tmp_path, [], tmp_path / "cache", SCRIPT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["java", "-cp", f"{home / 'classes'}:{home / 'libs'}/*", "KroxyliciousMain"]


def test_a_fetch_cut_short_is_done_again(tmp_path):
    version = fetch_kroxylicious().KROXYLICIOUS_VERSION
    (tmp_path / "cache" / f"kroxylicious-{version}" / "libs").mkdir(parents=True)
    result = run(tmp_path, ["java", "javac"], tmp_path / "cache", SCRIPT)
    assert result.returncode == 2 and "mvn not found" in result.stderr
