"""One SparkSession for every analytics test (start-up takes seconds), on local[1] bound to loopback.

Its JVM runs with the client compiler alone and the serial collector, as the demo's planner does
(demo/planner.py): jobs of a few thousand rows finish before the optimising compiler's and the parallel collector's
threads pay back, and on 2 cores those threads are taken from the rest of the suite. It loads Spark's classes
without the bytecode verifier, as every Spark JVM of the suite does (tests/spark_jvm.py).

Spark's SQL engine evaluates expressions as they are, without generating and compiling Java code for each query
(Janino's work), and keeps each query's plan as planned rather than planning it again at each stage (adaptive
execution): the same results, for a fifth less CPU on these jobs of a few hundred rows. The end-to-end runs of the
planner (the installed wheel's on local[*] and on a standalone cluster, the demo's) keep Spark's defaults, code
generation and adaptive execution on."""

import os
import shutil

import pytest

from demo.planner import SMALL_JOB_JVM
from tests.spark_jvm import UNVERIFIED


@pytest.fixture(scope="session")
def spark():
    pyspark = pytest.importorskip("pyspark.sql")
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        pytest.skip("Spark needs Java (17 or later) on PATH or in JAVA_HOME")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        pyspark.SparkSession.builder.master("local[1]")
        .appName("kafka-quota-proxy-tests")
        .config("spark.sql.shuffle.partitions", "2")
        # the tests' logs are small: expressions evaluated as they are, not compiled, and each plan kept as planned
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.sql.codegen.factoryMode", "NO_CODEGEN")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", f"{SMALL_JOB_JVM} {UNVERIFIED}")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
