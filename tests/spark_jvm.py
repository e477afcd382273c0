"""What the suite adds to the options of the Spark JVMs it starts: Spark's own classes loaded unverified.

A cold Spark JVM loads some 25,000 classes from Spark's jars, and the JVM's bytecode verifier checks each one as it
loads (and loads 2,500 more to check them against). On the usage log of tests/test_installed.py (``analyze`` with the
replay, no charts, local[*], demo/planner.py's options; 3 runs each way, load 4-7) the JVM's CPU went from 35.0-39.9
to 33.4-35.0 s and its time loading classes from 16.4-17.7 to 13.1-14.8 s (the verifier's 4.5-5.0 s gone); the whole
command's, 43-47 to 37-39 CPU-s. The verifier guards against malformed bytecode; Spark's jars are the ones pip
installed, the same in every run, and nothing a test checks depends on it. So the suite's Spark JVMs (the analytics
tests' session, the installed wheel's planner runs and standalone cluster, the demo's planner) skip it for every
class outside the Java runtime's own, which is not verified by default either way (``BytecodeVerificationRemote``, a
diagnostic option: it needs the unlock before it). Where the options go through ``JAVA_TOOL_OPTIONS``, every JVM says
so on its standard error ("Picked up JAVA_TOOL_OPTIONS"), never on its standard output.

What a user runs is unchanged: the product's Spark options (demo/planner.py's ``SMALL_JOB_JVM``) verify as the JVM
does by default.
"""

from __future__ import annotations

UNVERIFIED = "-XX:+UnlockDiagnosticVMOptions -XX:-BytecodeVerificationRemote"
