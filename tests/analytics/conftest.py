"""One SparkSession for every analytics test (start-up takes seconds), on local[1] bound to loopback.

Its JVM runs with the client compiler alone and the serial collector, as the demo's planner does
(demo/planner.py): jobs of a few thousand rows finish before the optimising compiler's and the parallel collector's
threads pay back, and on 2 cores those threads are taken from the rest of the suite."""

import os
import shutil

import pytest

from demo.planner import SMALL_JOB_JVM


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
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", SMALL_JOB_JVM)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
