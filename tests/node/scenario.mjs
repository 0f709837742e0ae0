// A second, independent MCP client: the TypeScript SDK drives rath-mcp through the key scenario
// (create, fork, merge, a transcript resource, an approval run whose interrupt is resolved, memory recall).
//
//   node scenario.mjs --transport stdio -- <server command> [args...]
//   node scenario.mjs --transport http --url http://127.0.0.1:8765/mcp
//
// Prints one JSON line per step ({"step", "ok", ...facts}) so a test can check every step; on a
// failure prints {"step", "ok": false, "error"} and exits 1. Install deps with tests/node/setup.sh.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

function parseArgs(argv) {
  const args = { transport: "stdio", url: null, command: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--") { args.command = argv.slice(i + 1); break; }
    else if (a === "--transport") args.transport = argv[++i];
    else if (a === "--url") args.url = argv[++i];
    else throw new Error(`unknown argument ${a}; usage: --transport stdio -- <cmd...> | --transport http --url <url>`);
  }
  if (args.transport === "stdio" && args.command.length === 0) throw new Error("--transport stdio needs -- <server command>");
  if (args.transport === "http" && !args.url) throw new Error("--transport http needs --url <url>");
  if (!["stdio", "http"].includes(args.transport)) throw new Error(`--transport must be stdio or http, not ${args.transport}`);
  return args;
}

function makeTransport(args) {
  if (args.transport === "http") return new StreamableHTTPClientTransport(new URL(args.url));
  const [command, ...rest] = args.command;
  return new StdioClientTransport({ command, args: rest, env: { ...process.env }, stderr: "inherit" });
}

let currentStep = "connect";
function report(step, facts) {
  console.log(JSON.stringify({ step, ok: true, ...facts }));
}

// Calls a tool; returns its structured result, throwing with the tool's own text on isError.
async function call(client, name, args = {}) {
  const result = await client.callTool({ name, arguments: args });
  const text = (result.content ?? []).map((c) => c.text ?? "").join(" ");
  if (result.isError) throw new Error(`${name} failed: ${text}`);
  return result.structuredContent ?? JSON.parse(text);
}

async function sessions(client) {
  currentStep = "create";
  const root = await call(client, "session_create", { message: "plan a picnic" });
  report("create", { session_id: root.session_id });

  currentStep = "fork";
  const forks = await call(client, "session_fork", { session_id: root.session_id, count: 2 });
  report("fork", { session_ids: forks.session_ids });

  currentStep = "merge";
  const branches = [];
  for (const [sid, text] of forks.session_ids.map((s, i) => [s, ["the park", "the beach"][i]])) {
    branches.push((await call(client, "session_append", { session_id: sid, content: text, role: "assistant" })).session_id);
  }
  const merged = await call(client, "session_merge", { session_ids: branches });
  const page = await call(client, "session_get", { session_id: merged.session_id });
  report("merge", { session_id: merged.session_id, parents: page.parents, contents: page.chunks.map((c) => c.content) });

  currentStep = "transcript";
  const resource = await client.readResource({ uri: `rath://sessions/${merged.session_id}/transcript` });
  report("transcript", { mime_type: resource.contents[0].mimeType, text: resource.contents[0].text });
  return merged.session_id;
}

async function approval(client, sessionId) {
  currentStep = "run_start";
  let run = await call(client, "run_start", { workflow: "approval", session_id: sessionId, wait_s: 10 });
  if (run.status !== "waiting") run = await call(client, "run_wait", { run_id: run.run_id, timeout_s: 10 });
  report("run_start", { run_id: run.run_id, status: run.status, interrupts: run.pending_interrupts.map((i) => i.kind) });

  currentStep = "interrupt_resolve";
  const interrupt = run.pending_interrupts[0];
  const resolved = await call(client, "interrupt_resolve", { interrupt_id: interrupt.interrupt_id, action: "approve" });
  report("interrupt_resolve", { interrupt_id: interrupt.interrupt_id, status: resolved.status });

  currentStep = "run_wait";
  const done = await call(client, "run_wait", { run_id: run.run_id, timeout_s: 10 });
  report("run_wait", { run_id: done.run_id, status: done.status, pending: done.pending_interrupts.length });
}

async function memory(client) {
  currentStep = "memory_recall";
  const kept = await call(client, "memory_remember", { content: "The user prefers picnics in the park." });
  await call(client, "memory_remember", { content: "Quarterly tax forms are due in April." });
  const recalled = await call(client, "memory_recall", { query: "picnic park", k: 3 });
  report("memory_recall", { remembered: kept.memory_id, hits: recalled.hits.map((h) => h.memory_id) });
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const client = new Client({ name: "rath-mcp-node-scenario", version: "0.1.0" });
  await client.connect(makeTransport(args));
  try {
    const tools = (await client.listTools()).tools.map((t) => t.name);
    report("connect", { transport: args.transport, server: client.getServerVersion()?.name, tools: tools.length });
    const merged = await sessions(client);
    await approval(client, merged);
    await memory(client);
  } finally {
    await client.close();
  }
}

main().catch((err) => {
  console.log(JSON.stringify({ step: currentStep, ok: false, error: String(err?.message ?? err) }));
  process.exit(1);
});
