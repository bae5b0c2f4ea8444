# One target per task; CI (.ci/run) calls `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
VENV := .venv
BIN := $(VENV)/bin
# The Triton model repository the stack serves. The test-only fixture honours the model
# contract; set MODEL_REPOSITORY=model_repository to serve the real models.
MODEL_REPOSITORY ?= tests/fixtures/model_repository
export MODSTREAM_STACK__MODEL_REPOSITORY := $(abspath $(MODEL_REPOSITORY))

.PHONY: bootstrap demo test test-unit test-deps lint typecheck stack-up stack-down bench clean

bootstrap:  ## install system packages and the virtual environment (idempotent)
	@scripts/bootstrap.sh

demo: bootstrap  ## the whole pipeline end to end on a local stack, with a summary
	$(BIN)/modstream demo

test-deps: bootstrap  ## what the browser test needs (Debian chromium, npm playwright-core)
	@bash tests/e2e/install.sh

stack-up: bootstrap
	$(BIN)/modstream stack up

stack-down:
	$(BIN)/modstream stack down

test: test-deps stack-up  ## every test, against the real Kafka, PostgreSQL and Triton
	$(BIN)/modstream migrate
	$(BIN)/pytest

test-unit: bootstrap  ## only the fast, service-free tests
	$(BIN)/pytest tests/unit

lint: bootstrap
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: bootstrap
	$(BIN)/mypy

bench: bootstrap stack-up
	$(BIN)/modstream migrate
	$(BIN)/python -m bench.pipeline

clean: stack-down
	rm -rf .modstream
