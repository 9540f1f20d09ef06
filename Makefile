# Two commands on a fresh machine: `make demo` and `make test` (both create .venv if needed).
# `make demo` installs the demo set (the core package alone, no extras); `make test` the full set (every extra).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
DEMO_STAMP := $(VENV)/.demo-stamp
export RAY_AUTH_MODE := disabled
export RAY_USAGE_STATS_ENABLED := 0
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: setup demo demo-setup test test-fast test-engine test-e2e test-ray test-gpu lint bench clean docs-numbers
TEST_WORKERS ?= 2  # pytest-xdist workers per lane (in the ray lane each worker starts its own local Ray, own temp dir)

$(STAMP): pyproject.toml constraints/ci.txt
	@echo "make: installing the full set into $(VENV): the package, every extra and the dev tools, on CI's tested versions (constraints/ci.txt)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,psi,parquet,xls,mlflow,tensorboard,wandb,notebook]' -c constraints/ci.txt  # every extra together, on CI's tested set
	touch $(STAMP) $(DEMO_STAMP)

# the demo set: the core package alone (torch, Ray, flwr, ...; no tracker, Parquet, PSI, notebook or dev tool)
$(DEMO_STAMP): pyproject.toml constraints/ci.txt
	@echo "make demo: installing what the demo needs (the core package, no extras) into $(VENV) on CI's tested versions;"
	@echo "           6-7 min the first time on 2 cores without a pip cache (most of it torch and its CUDA libraries), nothing after that"
	@start=$$(date +%s) && (test -x $(PY) || $(PYTHON) -m venv $(VENV)) \
	  && $(PY) -m pip install -q --upgrade pip && $(PY) -m pip install -q -e . -c constraints/ci.txt \
	  && echo "make demo: installed in $$(( $$(date +%s) - start )) s"
	touch $(DEMO_STAMP)

setup: $(STAMP)

demo-setup: $(DEMO_STAMP)

demo: $(DEMO_STAMP)  ## PBM-VFL on the digits over Ray actors (35 s on 2 cores after set-up)
	@echo "make demo: PBM-VFL on the scikit-learn digits, 4 parties over Ray actors, 20 epochs (about 35 s on 2 idle cores)"
	$(VENV)/bin/vfl run demo

test: $(STAMP)  ## every lane but gpu on $(TEST_WORKERS) workers: unit, engine and e2e, then ray
	$(VENV)/bin/pytest -q -m "not gpu" -n $(TEST_WORKERS) tests/unit tests/engine tests/e2e
	$(VENV)/bin/pytest -q -m "not gpu" -n $(TEST_WORKERS) tests/ray

test-fast: $(STAMP)  ## the unit lane: no engine run, no subprocess, no Ray (tests/unit/conftest.py refuses them)
	$(VENV)/bin/pytest -q tests/unit

test-engine: $(STAMP)  ## in-process engine runs
	$(VENV)/bin/pytest -q -m "not gpu" -n $(TEST_WORKERS) tests/engine

test-e2e: $(STAMP)  ## the CLI, subprocesses, the notebook
	$(VENV)/bin/pytest -q -m "not gpu" -n $(TEST_WORKERS) tests/e2e

test-ray: $(STAMP)  ## Ray actors, restarts, clusters (each xdist worker starts its own local Ray)
	$(VENV)/bin/pytest -q -m "not gpu" -n $(TEST_WORKERS) tests/ray

test-gpu: $(STAMP)  ## the gpu-marked tests (a CUDA machine; NF4 also needs bitsandbytes): CI has no GPU, run by hand
	$(VENV)/bin/pytest -q -m gpu -rA

lint: $(STAMP)  ## ruff on every package and the tests, mypy on all four packages (pyproject [tool.mypy] files)
	$(VENV)/bin/ruff check vfl parties strategies simulations tests
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) -m simulations.benchmarks.overhead --out bench-out

docs-numbers: $(DEMO_STAMP)  ## rewrite the docs' measured numbers from docs/measurements/*.json (--check: compare only)
	$(PY) -m simulations.docs_numbers

clean:
	rm -rf runs bench-out .pytest_cache

LOWER_VENV ?= .venv-lower
.PHONY: test-lower
test-lower:  ## the unit lane in a second venv on the lower bounds of flwr, dp-accounting, peft, transformers, opacus, numpy (constraints/lower.txt)
	test -x $(LOWER_VENV)/bin/python || $(PYTHON) -m venv $(LOWER_VENV)
	$(LOWER_VENV)/bin/python -m pip install -q --upgrade pip
	$(LOWER_VENV)/bin/python -m pip install -q -e '.[test]' -c constraints/lower.txt
	$(LOWER_VENV)/bin/pytest -q -n $(TEST_WORKERS) tests/unit
