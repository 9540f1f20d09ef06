# Two commands on a fresh machine: `make demo` and `make test` (both create .venv if needed).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
export RAY_AUTH_MODE := disabled
export RAY_USAGE_STATS_ENABLED := 0
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: setup demo test test-fast test-gpu lint bench clean

$(STAMP): pyproject.toml constraints/ci.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,parquet,mlflow,tensorboard,wandb,notebook]' -c constraints/ci.txt  # every extra together, on CI's tested set
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)  ## PBM-VFL on the digits over Ray actors (~1-1.5 min on 2 cores after set-up)
	$(VENV)/bin/vfl run demo

test: $(STAMP)  ## the whole suite (unit, contract, integration with Ray, e2e CLI)
	$(VENV)/bin/pytest -q -m "not gpu"

test-fast: $(STAMP)  ## without Ray and slow tests
	$(VENV)/bin/pytest -q -m "not gpu and not ray and not slow"

test-gpu: $(STAMP)  ## the gpu-marked tests (a CUDA machine; NF4 also needs bitsandbytes): CI has no GPU, run by hand
	$(VENV)/bin/pytest -q -m gpu -rA

lint: $(STAMP)  ## ruff on every package and the tests, mypy on all four packages (pyproject [tool.mypy] files)
	$(VENV)/bin/ruff check vfl parties strategies simulations tests
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) -m simulations.benchmarks.overhead --out bench-out

clean:
	rm -rf runs bench-out .pytest_cache

LOWER_VENV ?= .venv-lower
.PHONY: test-lower
test-lower:  ## the fast suite in a second venv on the lower bounds of flwr, dp-accounting, peft, transformers, opacus, numpy (constraints/lower.txt)
	test -x $(LOWER_VENV)/bin/python || $(PYTHON) -m venv $(LOWER_VENV)
	$(LOWER_VENV)/bin/python -m pip install -q --upgrade pip
	$(LOWER_VENV)/bin/python -m pip install -q -e '.[test]' -c constraints/lower.txt
	$(LOWER_VENV)/bin/pytest -q -m "not gpu and not ray and not slow"
