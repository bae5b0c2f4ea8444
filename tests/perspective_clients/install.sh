#!/usr/bin/env bash
# Installs the npm Perspective client the integration tests drive (perspective-api-client,
# pinned by package-lock.json), idempotently. The PyPI client is in the dev extra.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "tests/perspective_clients/install.sh: node and npm are required (apt-get install nodejs npm)" >&2
    exit 1
fi

cd "$here"
locked="$(node -p "require('./package-lock.json').packages['node_modules/perspective-api-client'].version")"
installed="$(node -p "try { require('./node_modules/perspective-api-client/package.json').version } catch (e) { '' }")"
if [ "$locked" != "$installed" ]; then
    npm ci --no-audit --no-fund --loglevel=error
fi
echo "perspective clients ready: perspective-api-client $(node -p "require('./node_modules/perspective-api-client/package.json').version")"
