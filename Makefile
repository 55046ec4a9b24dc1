# The kit sets itself up: the first `make grade` or `make test` creates .venv and installs the
# pinned dependencies into it; later runs reuse it (it is rebuilt only when pyproject.toml changes).

PYTHON     ?= python3
SUBMISSION ?= exercises
PROFILE    ?= quick
SEED       ?=
OUT        ?=
ARGS       ?=
SUBMISSIONS ?= submissions
RAY        ?=
VENV       := .venv
BIN        := $(VENV)/bin
READY      := $(VENV)/.installed
# Linux also gets the cluster extra (Ray, for grade-all --ray and its tests).
comma      := ,
EXTRAS     := $(if $(filter Linux,$(shell uname -s)),$(comma)cluster)

.DEFAULT_GOAL := help
.PHONY: help grade grade-all test bench lint simulate demo gpu-check candidate-kit

help: ## List the commands.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'
	@echo "  make grade SUBMISSION=path (a folder, .zip or .tar.gz; default exercises/)"
	@echo "             PROFILE=quick|full  SEED=N (a private set of examples)  OUT=report folder"
	@echo "             ARGS='--lang zh' (any other option of python -m grader)"
	@echo "  make grade-all SUBMISSIONS=folder RAY=address (a Ray cluster; auto: the local one)"

grade: $(READY) ## Grade SUBMISSION (default exercises/) and write its report.
	$(BIN)/python -m grader $(SUBMISSION) --profile $(PROFILE) $(if $(SEED),--seed $(SEED)) $(if $(OUT),--out $(OUT)) $(ARGS)

grade-all: $(READY) ## Grade every submission in SUBMISSIONS (a folder) and write a leaderboard.
	$(BIN)/python -m grader grade-all $(SUBMISSIONS) --profile $(PROFILE) $(if $(SEED),--seed $(SEED)) $(if $(OUT),--out $(OUT)) $(if $(RAY),--ray $(RAY)) $(ARGS)

candidate-kit: $(READY) ## Build the bundle for candidates (no answer key) under dist/.
	$(BIN)/python -m full_kit.bundle

simulate: $(READY) ## Static vs continuous batching, contiguous vs paged memory: table and plots.
	$(BIN)/python -m full_kit.simulate $(if $(OUT),--out $(OUT))

demo: $(READY) ## Serve a trace with a tiny transformer built on the answer key's parts.
	$(BIN)/python -m full_kit.demo

gpu-check: $(READY) ## On a CUDA machine: kernel checks natively, then the timing suite's table.
	$(BIN)/python -m full_kit.gpu_check $(if $(OUT),--out $(OUT))

test: $(READY) ## Run the kit's own tests (no GPU needed).
	$(BIN)/python -m pytest

bench: $(READY) ## Run the timing benchmarks (pytest-benchmark).
	$(BIN)/python -m pytest -m bench --benchmark-columns=min,median,max,rounds

lint: $(READY) ## Check the code with ruff.
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

$(READY): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "The kit needs Python 3.11 or newer: '$(PYTHON)' is missing or older. Try: make PYTHON=python3.11 ..."; exit 1; }
	@echo "Setting up $(VENV) (first run only; torch is large, this can take a few minutes)..."
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -e '.[dev$(EXTRAS)]'
	@$(BIN)/python -c 'import triton' 2>/dev/null || echo "Note: Triton installs on Linux only," \
	  "so part 4 (the Triton kernel) cannot run on this machine; every other part can."
	@touch $@
	@echo "$(VENV) is ready."
