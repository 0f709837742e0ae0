// The view side of MCP Apps (SEP-1865, io.modelcontextprotocol/ui): JSON-RPC 2.0 over postMessage
// with the host window. The host proxies `tools/call` to the MCP server and pushes the tool's input
// and result as `ui/notifications/*`; nothing here reaches the network.

const PROTOCOL_VERSION = "2026-01-26";

export class AppsBridge {
  constructor(target = window.parent) {
    this.target = target;
    this.nextId = 1;
    this.pending = new Map();
    this.handlers = new Map(); // notification method -> function(params)
    this.onTeardown = () => {};
    window.addEventListener("message", (event) => this.receive(event));
  }

  receive(event) {
    if (event.source !== this.target) return; // only the host speaks to us
    const msg = event.data;
    if (!msg || msg.jsonrpc !== "2.0") return;
    if (msg.id !== undefined && msg.method === undefined) {
      const waiter = this.pending.get(msg.id);
      if (!waiter) return;
      this.pending.delete(msg.id);
      if (msg.error) waiter.reject(new Error(msg.error.message || "host error"));
      else waiter.resolve(msg.result);
      return;
    }
    if (msg.id !== undefined) {
      this.answer(msg);
      return;
    }
    const handler = this.handlers.get(msg.method);
    if (handler) handler(msg.params || {});
  }

  answer(msg) {
    // Requests the host may send a view: teardown (stop polling first) and ping.
    if (msg.method === "ui/resource-teardown") this.onTeardown();
    const known = msg.method === "ui/resource-teardown" || msg.method === "ping";
    const reply = known
      ? { jsonrpc: "2.0", id: msg.id, result: {} }
      : { jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: `method not found: ${msg.method}` } };
    this.target.postMessage(reply, "*");
  }

  request(method, params) {
    const id = this.nextId++;
    this.target.postMessage({ jsonrpc: "2.0", id, method, params }, "*");
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
  }

  notify(method, params) {
    this.target.postMessage({ jsonrpc: "2.0", method, params }, "*");
  }

  on(method, handler) {
    this.handlers.set(method, handler);
  }

  async connect() {
    const result = await this.request("ui/initialize", {
      appInfo: { name: "rath-viewer", version: "1" },
      appCapabilities: { availableDisplayModes: ["inline", "fullscreen"] },
      protocolVersion: PROTOCOL_VERSION,
    });
    this.notify("ui/notifications/initialized", {});
    this.reportSize();
    return result || {};
  }

  reportSize() {
    // Hosts size a flexible frame from these notifications.
    let last = "";
    const send = () => {
      const el = document.documentElement;
      const size = { width: Math.ceil(el.scrollWidth), height: Math.ceil(el.scrollHeight) };
      const key = `${size.width}x${size.height}`;
      if (key !== last) {
        last = key;
        this.notify("ui/notifications/size-changed", size);
      }
    };
    new ResizeObserver(send).observe(document.body);
    send();
  }

  async callTool(name, args) {
    return this.request("tools/call", { name, arguments: args });
  }
}
