# Two commands do all set-up: `make demo` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install test demo lint bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch is pinned here, not in the package: this pin takes the CPU wheel; other specs pull a CUDA build.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q

demo: install
	$(BIN)/ltsgen --help
