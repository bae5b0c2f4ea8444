#!/usr/bin/env bash
# Idempotent set-up of a Debian machine for modstream: system packages for the local stack
# (PostgreSQL server, a Java 17+ runtime, Maven), Prometheus (its promtool checks the alert
# rules; `modstream demo --with-prometheus` runs the server), the project's virtual
# environment with the exact versions of requirements/dev.lock (and MLServer's own, of
# requirements/mlserver.lock), and a kustomize to render
# deploy/k8s when kubectl (which carries one) is not installed.
# Quiet when everything is already in place; make targets call it before anything else.
#
#   scripts/bootstrap.sh            # install what is missing
#   PYTHON=python3.11 scripts/bootstrap.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3.11}"
VENV=".venv"
STAMP="$VENV/.modstream-bootstrap"

say() { printf 'bootstrap: %s\n' "$*"; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1; then sudo "$@"
    else say "need root for: $*"; exit 1
    fi
}

java_major() {
    # "17.0.15" -> 17, "1.8.0_392" -> 8; prints 0 when java is absent.
    command -v java >/dev/null 2>&1 || { echo 0; return; }
    java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == 1 ? v[2] : v[1]); exit}'
}

# --- system packages ------------------------------------------------------------------------
packages=()
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || packages+=(postgresql)
[ "$(java_major)" -ge 17 ] || packages+=(default-jre-headless)
command -v mvn >/dev/null 2>&1 || packages+=(maven)
{ command -v promtool && command -v prometheus; } >/dev/null 2>&1 || packages+=(prometheus)
# The instruction-set tests: an emulated AVX2-only CPU (qemu user mode) and the no-AMX launcher
# built from bench/instruction_sets/noamx.c.
command -v qemu-x86_64 >/dev/null 2>&1 || packages+=(qemu-user)
command -v gcc >/dev/null 2>&1 || packages+=(gcc libc6-dev)
if [ "${#packages[@]}" -gt 0 ]; then
    say "installing ${packages[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null
fi
if ! id postgres >/dev/null 2>&1; then  # the Debian package creates it; PostgreSQL refuses root
    say "creating system user postgres"
    as_root useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
fi

# --- Python environment ---------------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
    command -v "$PYTHON" >/dev/null 2>&1 || { say "$PYTHON not found (Python 3.11 needed)"; exit 1; }
    say "creating $VENV with $PYTHON"
    "$PYTHON" -m venv "$VENV"
fi
# requirements/dev.lock pins every package of the dev, stack and models extras and their
# dependencies, with hashes (`make lock` makes it with uv from pyproject.toml; a test checks
# that the two agree). The project itself goes in editable, without dependencies of its own.
LOCK="requirements/dev.lock"
wanted="$(cat pyproject.toml "$LOCK" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$wanted" ]; then
    say "installing $LOCK and the project into $VENV"
    log="$(mktemp)"
    if ! { "$VENV/bin/python" -m pip install -q --disable-pip-version-check --require-hashes \
                -r "$LOCK" \
            && "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps -e . ; \
         } >"$log" 2>&1; then
        cat "$log"; rm -f "$log"; say "pip install failed"; exit 1
    fi
    rm -f "$log"
    printf '%s\n' "$wanted" > "$STAMP"
fi

# --- MLServer's own environment (stack.mlserver, tests/integration/test_inference_servers.py) ---
# MLServer, the second Open Inference Protocol server the model tests and the worker run
# against, pins fastapi below the review service's, so it gets a virtual environment of its own
# with the exact versions of requirements/mlserver.lock. Made here, never when a test runs.
MLSERVER_VENV=".venv-mlserver"
MLSERVER_LOCK="requirements/mlserver.lock"
MLSERVER_STAMP="$MLSERVER_VENV/.modstream-bootstrap"
if [ ! -x "$MLSERVER_VENV/bin/python" ]; then
    say "creating $MLSERVER_VENV with $PYTHON"
    "$PYTHON" -m venv "$MLSERVER_VENV"
fi
wanted="$(sha256sum "$MLSERVER_LOCK" | cut -d' ' -f1)"
if [ ! -f "$MLSERVER_STAMP" ] || [ "$(cat "$MLSERVER_STAMP")" != "$wanted" ]; then
    say "installing $MLSERVER_LOCK into $MLSERVER_VENV"
    log="$(mktemp)"
    if ! "$MLSERVER_VENV/bin/python" -m pip install -q --disable-pip-version-check \
            --require-hashes -r "$MLSERVER_LOCK" >"$log" 2>&1; then
        cat "$log"; rm -f "$log"; say "pip install failed"; exit 1
    fi
    rm -f "$log"
    printf '%s\n' "$wanted" > "$MLSERVER_STAMP"
fi

# --- kustomize (deploy/k8s) -------------------------------------------------------------------
# `kubectl kustomize` renders the manifests; without kubectl, the kustomize of the Go module
# proxy (built with the machine's Go) goes into the virtual environment.
KUSTOMIZE_VERSION="v5.7.1"
if ! command -v kubectl >/dev/null 2>&1 && [ ! -x "$VENV/bin/kustomize" ]; then
    command -v go >/dev/null 2>&1 || { say "neither kubectl nor go found (one renders deploy/k8s)"; exit 1; }
    say "installing kustomize $KUSTOMIZE_VERSION into $VENV/bin (go install)"
    GOBIN="$PWD/$VENV/bin" go install "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"
fi

# --- ghz (bench.online and tests/integration/test_online_ghz.py) --------------------------------
# An open-loop gRPC load tool, built from the Go module proxy with the machine's Go (v0.93.0 is
# what `go install github.com/bojand/ghz/cmd/ghz@latest` resolves to there; pinned here).
GHZ_VERSION="v0.93.0"
if [ ! -x "$VENV/bin/ghz" ]; then
    command -v go >/dev/null 2>&1 || { say "go not found (it builds ghz for the online tests)"; exit 1; }
    say "installing ghz $GHZ_VERSION into $VENV/bin (go install)"
    GOBIN="$PWD/$VENV/bin" go install "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION"
fi

# --- vegeta (bench.perspective) -----------------------------------------------------------------
# An open-loop HTTP load tool, built from the Go module proxy with the machine's Go (pinned).
VEGETA_VERSION="v12.13.0"
if [ ! -x "$VENV/bin/vegeta" ]; then
    command -v go >/dev/null 2>&1 || { say "go not found (it builds vegeta for bench.perspective)"; exit 1; }
    say "installing vegeta $VEGETA_VERSION into $VENV/bin (go install)"
    GOBIN="$PWD/$VENV/bin" go install "github.com/tsenart/vegeta/v12@$VEGETA_VERSION"
fi
