# Two commands a new user runs: `make demo` and `make test`. Both create .venv and install into it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench check-compose clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m proxy.demo

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider

bench: $(STAMP)
	$(PY) bench/passthrough.py
	$(PY) bench/quota_accuracy.py
	$(PY) bench/codec.py
	$(PY) bench/pipeline_cost.py
	$(PY) bench/relay_floor.py
	$(PY) bench/producer_ids.py
	$(PY) bench/analytics.py --sizes 1000000

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
