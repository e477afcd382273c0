# Two commands a new user runs: `make demo` and `make test`. Both create .venv and install into it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
FUZZ_STAMP := $(VENV)/.installed-fuzz
FUZZ_SECONDS ?= 60

.PHONY: demo test check bytecode kafka bench fuzz soak check-compose clean

$(STAMP): pyproject.toml setup.py $(wildcard proxy/codec/native/*) $(wildcard proxy/connection/native/*) $(wildcard quota/primitives/native/*)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m demo

# On 6 workers (pytest-xdist): the tests mostly wait on real clocks. Six groups run each on one worker, one test at a
# time (tests/conftest.py): the rate measurements ("rate", "flow"), the Spark jobs ("spark"), the installed wheel and
# the demo ("end-to-end"), and the Kafka clusters' tests ("kafka1", "kafka3"). xdist hands a worker its next unit of
# work only when two of its tests are left, so with fewer workers than groups a whole group waits behind another; a
# worker nearing its group's end takes the other tests. The suite is CPU-bound on 2 cores (about 1,400 CPU-seconds):
# a seventh worker made it no shorter and failed more rate measurements (two CI-like runs at -n 7: 5 and 8 failures,
# each a measurement or a timing). Ports never collide (tests/harness.py).
# Apache Kafka's jars (broker and tools, the version pinned in tools/fetch_kafka.py), fetched by Maven into
# ~/.cache/kafka-quota-proxy once; a second run finds them and does nothing. Needs Java 17+ and Maven.
kafka:
	$(PYTHON) tools/fetch_kafka.py

# The linter, the formatter (ruff) and the type checker (mypy, on the folders [tool.mypy] lists; strict on the pure
# core and the connection runtime), all configured in pyproject.toml, run before the tests: `make test` stops here on a
# finding. `ruff check --fix . && ruff format .` in the venv fixes most of what they find.
check: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# Bytecode is written first (PYTHONDONTWRITEBYTECODE, set in some CI images, is cleared for the run), beside the
# checks on the other core: otherwise every proxy the tests start as a process of its own compiles the proxy again
# (0.65 CPU-s of its start, of 0.95; the suite starts more than a hundred), and each of the six workers rewrites
# every test module's asserts while collecting (13 CPU-s each; 6.6 with pytest's rewritten modules written once).
# A run that goes wrong ends itself and says why: a test hung past its timeout ends its worker with every stack
# printed (tests/watchdog.py), and after SESSION_SECONDS no worker starts another test, so the summary of failures
# is printed long before a CI's own limit would cut the run off mid-output.
SESSION_SECONDS ?= 3600
test: $(STAMP) kafka
	$(MAKE) --no-print-directory -j 2 check bytecode
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -p no:cacheprovider -n 6 --dist loadgroup \
		--session-timeout $(SESSION_SECONDS)

bytecode: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(PY) -m compileall -q -j 0 proxy quota config analytics demo bench tests tools >/dev/null
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -p no:cacheprovider --collect-only >$(VENV)/collect.log 2>&1 \
		|| (cat $(VENV)/collect.log; exit 1)

# Coverage-guided fuzzing of the codec (atheris): FUZZ_SECONDS of it; crashing inputs land in .fuzz/crashes/.
$(FUZZ_STAMP): pyproject.toml $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,fuzz]'
	touch $(FUZZ_STAMP)

fuzz: $(FUZZ_STAMP)
	mkdir -p .fuzz/corpus .fuzz/crashes
	$(PY) tests/fuzz/fuzz_codec.py -max_total_time=$(FUZZ_SECONDS) -artifact_prefix=.fuzz/crashes/ \
		-rss_limit_mb=2048 -timeout=10 -print_final_stats=1 .fuzz/corpus

# The fault suite (tests/integration/test_faults.py) injecting faults for SOAK_SECONDS instead of a few seconds.
SOAK_SECONDS ?= 600
soak: $(STAMP)
	SOAK_SECONDS=$(SOAK_SECONDS) $(PY) -m pytest -q -s -p no:cacheprovider tests/integration/test_faults.py

bench: $(STAMP)
	$(PY) bench/passthrough.py
	$(PY) bench/quota_accuracy.py
	$(PY) bench/inflight_bound.py
	$(PY) bench/codec.py
	$(PY) bench/pipeline_cost.py
	$(PY) bench/relay_floor.py
	$(PY) bench/splice.py
	$(PY) bench/producer_ids.py
	$(PY) bench/evasion.py
	$(PY) bench/analytics.py --sizes 1000000

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
