// The TypeScript SDK (its 2025-11-25 tasks support, client.experimental.tasks) runs a durable run as a
// task against `rath-mcp serve --transport http`: created, its approval asked through tasks/result as an
// elicitation (answered "approve" here), then finished with the tool's own result.
//
//   node tasks.mjs --url http://127.0.0.1:8765/mcp
//
// Prints one JSON line per message of the task's stream ({"type", ...}), then {"step": "done", "ok": true,
// "task": <tasks/get once finished>, "listed": bool}; on a failure {"ok": false, "error"} and exit 1.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const at = process.argv.indexOf("--url");
if (at < 0 || !process.argv[at + 1]) {
  console.error("usage: node tasks.mjs --url <http://host:port/mcp>");
  process.exit(2);
}
const url = new URL(process.argv[at + 1]);

async function main() {
  const client = new Client({ name: "ts-tasks", version: "1.0.0" }, { capabilities: { elicitation: { form: {} } } });
  const elicited = [];
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    elicited.push(request.params._meta?.["io.modelcontextprotocol/related-task"]?.taskId ?? null);
    return { action: "accept", content: { decision: "approve" } };
  });
  await client.connect(new StreamableHTTPClientTransport(url));
  const stream = client.experimental.tasks.callToolStream(
    { name: "run_start", arguments: { workflow: "approval", message: "a task from TypeScript" } },
    undefined,
    { task: { ttl: 60000 } },
  );
  let taskId = null;
  let result = null;
  for await (const message of stream) {
    if (message.type === "taskCreated") taskId = message.task.taskId;
    if (message.type === "result") result = message.result;
    if (message.type === "error") throw message.error;
    console.log(JSON.stringify({ type: message.type, status: message.task?.status ?? null }));
  }
  const task = await client.experimental.tasks.getTask(taskId);
  const listed = (await client.experimental.tasks.listTasks()).tasks.some((t) => t.taskId === taskId);
  console.log(JSON.stringify({ step: "done", ok: true, taskId, task, listed, elicited, result }));
  await client.close();
}

main().catch((error) => {
  console.log(JSON.stringify({ ok: false, error: String(error?.stack ?? error) }));
  process.exit(1);
});
