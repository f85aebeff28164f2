# Strategist: `make help` lists the targets.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STRATEGIST := $(VENV)/bin/strategist
IMAGE  ?= us-docker.pkg.dev/strategist-project/strategist/trainer:0.1.0
COMPILED ?= compiled

.DEFAULT_GOAL := help
.PHONY: help install run test test-heavy test-fast lint compile image bench clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed ## Create .venv and install Strategist with its dev tools (idempotent)

run: install ## Compare mirrored, multi-worker and parameter-server training locally (kfp.local)
	$(STRATEGIST) compare

# A test file runs whole in one of two processes, so a file's module fixtures (a comparison,
# a shared bucket) are built once.
PYTEST_PARALLEL ?= -n 2 --dist loadfile

test: install ## Run the test suite (all but the heavy tests)
	$(PY) -m pytest -q $(PYTEST_PARALLEL) -m "not heavy"

test-heavy: install ## Run the heavy tests: built-in ImageNet-sized models on real clusters (minutes each)
	$(PY) -m pytest -q $(PYTEST_PARALLEL) -m heavy

test-fast: install ## Run the tests that start no TensorFlow cluster
	$(PY) -m pytest -q $(PYTEST_PARALLEL) -m "not cluster"

lint: install ## ruff and hadolint
	$(VENV)/bin/ruff check components pipelines tests benchmarks examples
	$(VENV)/bin/ruff format --check components pipelines tests benchmarks examples
	$(VENV)/bin/hadolint containers/Dockerfile

compile: install ## Write the compiled pipelines to $(COMPILED)/ (both pipelines, both targets)
	@mkdir -p $(COMPILED)
	@for pipeline in training comparison; do for target in vertex kfp; do \
	    $(STRATEGIST) compile --pipeline $$pipeline --target $$target --image $(IMAGE) \
	        -o $(COMPILED)/$$pipeline-$$target.yaml || exit 1; \
	done; done

VARIANT ?= all
image: ## Build the trainer image (gpu and cpu variants) with docker, podman or buildah
	containers/build.sh --variant $(VARIANT) --tag $(IMAGE)

BENCH_ARGS ?=
bench: install ## Run the benchmarks (trainer vs bare TensorFlow, input pipeline, orchestration): one table
	$(PY) -m benchmarks.run_all $(BENCH_ARGS)

clean: ## Remove build outputs (keeps .venv and runs/)
	rm -rf $(COMPILED) build dist *.egg-info .pytest_cache .ruff_cache
