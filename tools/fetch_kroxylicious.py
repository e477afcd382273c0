#!/usr/bin/env python3
"""Fetch Kroxylicious (the open-source Kafka proxy) from Maven Central into the cache, once, and compile its main.

    python tools/fetch_kroxylicious.py        # prints the java command line, less the configuration file

Maven Central serves ``io.kroxylicious:kroxylicious-runtime`` (the proxy itself) but not ``kroxylicious-app`` (its
command line, shipped as an archive on GitHub), so the runtime and its runtime dependencies are fetched as
tools/fetch_kafka.py fetches Kafka (a generated pom, ``mvn dependency:copy-dependencies``), with slf4j's simple
binding so that the proxy's warnings are written somewhere, and tools/KroxyliciousMain.java (the app's start-up in
a dozen lines: parse the configuration, ``KafkaProxy.startup()``, ``block()``) is compiled beside them with javac.
Everything lands in ``<cache>/kroxylicious-<version>/`` (``libs/``, ``classes/``), ``.complete`` written last: a run
cut short is redone, a finished one is never fetched again. Missing Java, javac or Maven is one line naming what to
install, and exit status 2. Used by bench/anchors_kroxylicious.py.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fetch_kafka import JAVA, SetupError, cache_root, copy_dependencies, dependency_blocks, require, settle  # noqa: E402

KROXYLICIOUS_VERSION = "0.12.0"  # the newest release Maven Central serves the runtime of
ARTIFACTS = (
    ("io.kroxylicious", "kroxylicious-runtime", KROXYLICIOUS_VERSION),
    ("org.slf4j", "slf4j-simple", "2.0.17"),  # the slf4j version Kroxylicious 0.12 is built with
)
MAIN = Path(__file__).resolve().parent / "KroxyliciousMain.java"
MAIN_CLASS = MAIN.stem


def home(version: str = KROXYLICIOUS_VERSION) -> Path:
    return cache_root() / f"kroxylicious-{version}"


def fetch(version: str = KROXYLICIOUS_VERSION, quiet: bool = True) -> Path:
    """Fetch the runtime's jars and compile the main, once; return the folder holding libs/ and classes/."""
    target = home(version)
    if (target / ".complete").exists():
        return target
    require("java", JAVA)
    javac = require("javac", "a Java 17+ JDK (Debian: apt install openjdk-17-jdk-headless)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".fetch-kroxylicious-{version}-") as work:
        deps = dependency_blocks(ARTIFACTS, "io.kroxylicious", version)
        what = f"io.kroxylicious:kroxylicious-runtime:{version}"
        libs = copy_dependencies(Path(work), deps, ["-DincludeScope=runtime"], what, quiet)
        jars = sorted(p.name for p in libs.glob("*.jar"))
        if f"kroxylicious-runtime-{version}.jar" not in jars:
            raise SetupError(f"mvn finished but kroxylicious-runtime-{version}.jar is not among the {len(jars)} jars")
        classes = Path(work) / "classes"
        result = subprocess.run(
            [javac, "-d", str(classes), "-cp", f"{libs}/*", str(MAIN)], capture_output=True, text=True
        )
        if result.returncode != 0:
            raise SetupError(f"javac could not compile {MAIN.name} against Kroxylicious {version}:\n{result.stderr}")
        settle(target, [libs, classes], "\n".join(jars) + "\n")
    return target


def command(config: Path, version: str = KROXYLICIOUS_VERSION, jvm_options: tuple[str, ...] = ()) -> list[str]:
    """The java command that runs Kroxylicious ``version`` (fetched) with the configuration file ``config``."""
    target = home(version)
    classpath = f"{target / 'classes'}:{target / 'libs'}/*"
    return ["java", *jvm_options, "-cp", classpath, MAIN_CLASS, str(config)]


def main() -> int:
    try:
        fetch(quiet="-v" not in sys.argv[1:])
    except SetupError as error:
        print(f"fetch_kroxylicious: {error}", file=sys.stderr)
        return 2
    print(" ".join(command(Path("CONFIG.yaml"))[:-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
