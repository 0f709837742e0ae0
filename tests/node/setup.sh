#!/usr/bin/env bash
# Installs the second MCP client's Node dependencies (the TypeScript SDK, pinned in package.json and
# package-lock.json) into tests/node/node_modules. Idempotent: does nothing when the pinned version is
# already installed. Needs node >= 18 and npm on PATH; touches nothing outside tests/node.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v npm >/dev/null 2>&1; then
  echo "tests/node/setup.sh: npm is not on PATH; install Node.js >= 18 (with npm) and run this script again" >&2
  exit 1
fi

want=$(node -p "require('./package-lock.json').packages['node_modules/@modelcontextprotocol/sdk'].version")
have=$(node -p "try { require('./node_modules/@modelcontextprotocol/sdk/package.json').version } catch { '' }")
if [ "$have" = "$want" ]; then
  echo "tests/node: @modelcontextprotocol/sdk $have already installed"
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
echo "tests/node: installed @modelcontextprotocol/sdk $want"
