# Strategist: `make help` lists the targets.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STRATEGIST := $(VENV)/bin/strategist
IMAGE  ?= strategist-trainer:dev
COMPILED ?= compiled

.DEFAULT_GOAL := help
.PHONY: help install run test test-fast lint compile image bench clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed ## Create .venv and install Strategist with its dev tools (idempotent)

run: install ## Train the default model on the offline digits dataset on a localhost cluster
	$(STRATEGIST) train --local --strategy multi_worker_mirrored --workers 2 --output runs/latest

test: install ## Run the whole test suite
	$(PY) -m pytest -q

test-fast: install ## Run the tests that start no TensorFlow cluster
	$(PY) -m pytest -q -m "not cluster"

lint: install ## ruff and hadolint
	$(VENV)/bin/ruff check components pipelines tests benchmarks
	$(VENV)/bin/ruff format --check components pipelines tests benchmarks
	$(VENV)/bin/hadolint containers/Dockerfile

compile: install ## Write the compiled pipelines to $(COMPILED)/
	@echo "compile: the pipelines are not built yet" >&2; exit 1

VARIANT ?= all
image: ## Build the trainer image (gpu and cpu variants) with docker, podman or buildah
	containers/build.sh --variant $(VARIANT) --tag $(IMAGE)

bench: install ## Run the benchmarks and print one table
	@echo "bench: the benchmarks are not built yet" >&2; exit 1

clean: ## Remove build outputs (keeps .venv and runs/)
	rm -rf $(COMPILED) build dist *.egg-info .pytest_cache .ruff_cache
