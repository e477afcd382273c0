#!/usr/bin/env python3
"""Fetch a pinned Apache Kafka (broker and tools) from Maven Central into a cache, once.

    python tools/fetch_kafka.py            # prints the folder holding the jars (libs/*.jar)

The jars land in $KQP_KAFKA_CACHE (default ~/.cache/kafka-quota-proxy/kafka-<version>/libs), outside the work
tree, with a `.complete` marker written last: a run cut short is redone, a finished one is never fetched again.
Missing Java or Maven is one line naming what to install, and exit status 2: never a silent skip.

Apache Kafka 4.4.0: the newest 4.x release, KRaft only (as every Kafka 4 is), and the one Maven Central resolves
with all its dependencies for both artifacts (the broker `kafka_2.13` and `kafka-tools`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

KAFKA_VERSION = "4.4.0"
# (group, artifact, version): the broker, the tools, and the slf4j 1.x binding to log4j 2 that Kafka's own
# distribution ships (Maven's dependency tree leaves it out: without it the broker logs nothing at all).
ARTIFACTS = (
    ("org.apache.kafka", "kafka_2.13", KAFKA_VERSION),
    ("org.apache.kafka", "kafka-tools", KAFKA_VERSION),
    ("org.apache.logging.log4j", "log4j-slf4j-impl", "2.25.5"),
)
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
JAVA = "a Java 17+ runtime (Debian: apt install openjdk-17-jre-headless)"

POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafka-quota-proxy</groupId>
  <artifactId>kafka-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{deps}
  </dependencies>
</project>
"""

DEP = """    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{version}</version>
    </dependency>"""


def cache_root() -> Path:
    configured = os.environ.get("KQP_KAFKA_CACHE")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kafka-quota-proxy"


def kafka_home(version: str = KAFKA_VERSION) -> Path:
    """The folder whose libs/ holds the jars of `version` (fetched or not)."""
    return cache_root() / f"kafka-{version}"


def is_fetched(version: str = KAFKA_VERSION) -> bool:
    return (kafka_home(version) / ".complete").exists()


class SetupError(Exception):
    """What is missing, in one line."""


def require(program: str, what: str) -> str:
    path = shutil.which(program)
    if path is None:
        raise SetupError(
            f"{program} not found: install {what} (Apache Kafka {KAFKA_VERSION} is fetched with Maven "
            f"and runs on Java 17+)"
        )
    return path


def dependency_blocks(artifacts: tuple[tuple[str, str, str], ...], group: str, version: str) -> str:
    """The pom's DEP blocks of ``artifacts`` (group, artifact, version), those of ``group`` at ``version``."""
    return "\n".join(DEP.format(group=g, artifact=a, version=version if g == group else v) for g, a, v in artifacts)


def copy_dependencies(work_dir: Path, dependencies: str, options: list[str], what: str, quiet: bool) -> Path:
    """Resolve ``dependencies`` (DEP blocks) with Maven, through a pom generated in ``work_dir``, into
    ``work_dir/libs``; ``options`` are the dependency plugin's (its scope, transitivity). SetupError naming ``what``
    when mvn is missing or fails."""
    mvn = require("mvn", "Apache Maven 3.8+ (Debian: apt install maven)")
    (work_dir / "pom.xml").write_text(POM.format(deps=dependencies))
    libs = work_dir / "libs"
    command = [
        mvn,
        "-B",
        "-f",
        str(work_dir / "pom.xml"),
        f"{DEPENDENCY_PLUGIN}:copy-dependencies",
        f"-DoutputDirectory={libs}",
        *options,
    ]
    if quiet:
        command.insert(2, "-q")
    result = subprocess.run(command, capture_output=quiet, text=True)
    if result.returncode != 0:
        tail = (result.stdout or "")[-2000:] + (result.stderr or "")[-2000:]
        raise SetupError(f"mvn could not fetch {what} from Maven Central (exit {result.returncode}):\n{tail}")
    return libs


def settle(home: Path, folders: list[Path], listing: str) -> None:
    """Move the fetched ``folders`` into ``home`` (replacing what a run cut short left), then write ``.complete``."""
    if home.exists():
        shutil.rmtree(home)
    home.mkdir()
    for folder in folders:
        shutil.move(str(folder), home / folder.name)
    (home / ".complete").write_text(listing)


def fetch(version: str = KAFKA_VERSION, quiet: bool = True) -> Path:
    """Fetch Kafka's jars once; return the folder holding libs/."""
    home = kafka_home(version)
    if (home / ".complete").exists():
        return home
    require("java", JAVA)
    home.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=home.parent, prefix=f".fetch-{version}-") as work:
        deps = dependency_blocks(ARTIFACTS, "org.apache.kafka", version)
        libs = copy_dependencies(Path(work), deps, ["-DincludeScope=runtime"], f"Apache Kafka {version}", quiet)
        jars = sorted(p.name for p in libs.glob("*.jar"))
        if not any(j.startswith(f"kafka_2.13-{version}") for j in jars):
            raise SetupError(f"mvn finished but kafka_2.13-{version}.jar is not among the {len(jars)} jars fetched")
        settle(home, [libs], "\n".join(jars) + "\n")
    return home


def fetch_jar(group: str, artifact: str, version: str, quiet: bool = True) -> Path:
    """One artifact's own jar, without its dependencies (a broker plugin whose dependencies Kafka's libs already
    hold), into the same cache: ``<cache>/<artifact>-<version>/libs``, fetched once (``.complete`` written last)."""
    home = cache_root() / f"{artifact}-{version}"
    if (home / ".complete").exists():
        return home / "libs"
    home.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=home.parent, prefix=f".fetch-{artifact}-") as work:
        dep = DEP.format(group=group, artifact=artifact, version=version)
        what = f"{group}:{artifact}:{version}"
        libs = copy_dependencies(Path(work), dep, ["-DexcludeTransitive=true"], what, quiet)
        jar = libs / f"{artifact}-{version}.jar"
        if not jar.exists():
            raise SetupError(f"mvn finished but {jar.name} is not among the jars fetched for {what}")
        settle(home, [libs], jar.name + "\n")
    return home / "libs"


def main() -> int:
    try:
        home = fetch(quiet="-v" not in sys.argv[1:])
    except SetupError as error:
        print(f"fetch_kafka: {error}", file=sys.stderr)
        return 2
    print(home / "libs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
