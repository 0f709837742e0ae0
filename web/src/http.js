// The browser side of /ui: an MCP client over Streamable HTTP to the server's own /mcp endpoint
// (same origin). It does the initialize handshake, keeps the session id, reads JSON or SSE
// answers, and sends the bearer token it was given (from `#token=…`, or typed in when asked).

const PROTOCOL_VERSION = "2025-11-25";
const TOKEN_KEY = "rath-ui-token";

export class AuthRequired extends Error {}

export function takeTokenFromFragment() {
  const match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname + location.search); // keep it out of the address bar
  }
}

export function setToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// A GET of this origin with the bearer token (a plain link cannot carry one): /ui/artifacts/{id}.
export async function fetchWithToken(path) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const response = await fetch(path, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
  if (response.status === 401) throw new AuthRequired(`the server answered ${response.status}`);
  if (!response.ok) {
    const text = await response.text();
    let said = text.slice(0, 200);
    try {
      said = JSON.parse(text).error_description || said;
    } catch {
      // not JSON: the text as it came
    }
    throw new Error(`HTTP ${response.status}: ${said}`);
  }
  return response;
}

export class HttpClient {
  constructor(endpoint) {
    this.endpoint = endpoint;
    this.session = null;
    this.nextId = 1;
    this.ready = null;
  }

  headers() {
    const headers = { "Content-Type": "application/json", Accept: "application/json, text/event-stream" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = `Bearer ${token}`;
    if (this.session) headers["Mcp-Session-Id"] = this.session;
    if (this.protocol) headers["Mcp-Protocol-Version"] = this.protocol;
    return headers;
  }

  async post(message) {
    const response = await fetch(this.endpoint, { method: "POST", headers: this.headers(), body: JSON.stringify(message) });
    if (response.status === 401 || response.status === 403) throw new AuthRequired(`the server answered ${response.status}`);
    if (response.status === 404 && this.session) {
      this.session = null; // the server forgot our session (a restart): start again
      this.ready = null;
      throw new SessionLost();
    }
    const sid = response.headers.get("mcp-session-id");
    if (sid) this.session = sid;
    if (message.id === undefined) return null;
    if (!response.ok && response.status !== 200) {
      const text = await response.text();
      throw new Error(`HTTP ${response.status}: ${text.slice(0, 200)}`);
    }
    const type = response.headers.get("content-type") || "";
    const body = await response.text();
    const reply = type.includes("text/event-stream") ? lastReplyInStream(body, message.id) : JSON.parse(body);
    if (reply.error) throw new Error(reply.error.message);
    return reply.result;
  }

  async handshake() {
    const result = await this.post({
      jsonrpc: "2.0",
      id: this.nextId++,
      method: "initialize",
      params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: "rath-ui", version: "1" } },
    });
    this.protocol = result.protocolVersion;
    await this.post({ jsonrpc: "2.0", method: "notifications/initialized" });
  }

  async request(method, params) {
    for (let attempt = 0; ; attempt++) {
      if (!this.ready) this.ready = this.handshake().catch((e) => { this.ready = null; throw e; });
      await this.ready;
      try {
        return await this.post({ jsonrpc: "2.0", id: this.nextId++, method, params });
      } catch (e) {
        if (!(e instanceof SessionLost) || attempt > 0) throw e;
      }
    }
  }

  async callTool(name, args) {
    return this.request("tools/call", { name, arguments: args });
  }
}

class SessionLost extends Error {}

function lastReplyInStream(text, id) {
  // An SSE body: `data:` lines per event; the reply is the event whose id matches the request.
  for (const block of text.split(/\r?\n\r?\n/)) {
    const data = block.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
    if (!data) continue;
    const msg = JSON.parse(data);
    if (msg.id === id) return msg;
  }
  throw new Error("the server's event stream ended without an answer");
}
