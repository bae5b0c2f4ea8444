#!/usr/bin/env bash
# Installs what the browser test needs, idempotently: Debian's chromium and the npm
# playwright-core pinned by package-lock.json (no browser download: we drive /usr/bin/chromium).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if ! command -v chromium >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    sudo_cmd=""
    if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi
    $sudo_cmd apt-get update -qq
    $sudo_cmd apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "tests/e2e/install.sh: node and npm are required (apt-get install nodejs npm)" >&2
    exit 1
fi

cd "$here"
locked="$(node -p "require('./package-lock.json').packages['node_modules/playwright-core'].version")"
installed="$(node -p "try { require('./node_modules/playwright-core/package.json').version } catch (e) { '' }")"
if [ "$locked" != "$installed" ]; then
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
fi
echo "e2e ready: $(chromium --version 2>/dev/null || echo 'chromium ?'), playwright-core $(node -p "require('./node_modules/playwright-core/package.json').version")"
