// The rath-mcp run viewer. One HTML file, two ways in:
// - an MCP App (inside a host's sandboxed frame): it learns what to show from the tool call that
//   opened it and calls tools back through the host (AppsBridge);
// - the /ui page of the HTTP transports (a top-level browser window): it routes on its own path
//   and calls tools on the server's /mcp endpoint (HttpClient).

import { AppsBridge } from "./bridge.js";
import { badge, duration, h, short, when } from "./dom.js";
import { AuthRequired, HttpClient, fetchWithToken, setToken, takeTokenFromFragment } from "./http.js";
import { artifactsCard, effectCard, header, interruptCard, isSettled, lineageCard, runLink, timeline } from "./run.js";

const POLL_MS = 1200;
const WAITING_POLL_MS = 4000;
const LIST_POLL_MS = 3000;
const STATUSES = ["queued", "running", "waiting", "needs_review", "succeeded", "failed", "cancelled", "timed_out"];
const embedded = window.parent !== window;
const root = document.getElementById("app");
let client;
let page = null; // the page on screen; replaced on navigation
const history_ = []; // routes visited inside a host frame (no address bar there)

// A tool answered with an error result: the server read the request and refused it (an unknown id,
// say), unlike a network or protocol failure, which may pass.
class ToolFailed extends Error {}

async function call(name, args) {
  const result = await client.callTool(name, args);
  const text = (result.content || []).map((c) => c.text || "").join("\n");
  if (result.isError) throw new ToolFailed(text || `${name} failed`);
  return result.structuredContent || JSON.parse(text);
}

// The page for an id the server does not know (a mistyped or stale link): what was asked for, what
// the server said, and the way back to the runs.
function missing(what, id, why) {
  const toRuns = { view: "runs" };
  return h("section.card.missing", { id: "missing", dataset: { what } },
    h("h1", {}, `No such ${what}`),
    h("p", {}, `This server has no ${what} `, h("code", {}, id), " that you may see."),
    h("p.muted", {}, `The server said: ${why}`),
    h("p", {}, h("a", { id: "to-runs", href: pathOf(toRuns), onclick: (e) => go(e, toRuns) }, "← All runs")));
}

// The first look at a run or session; an id the server refuses ends the page there (no polling on).
async function firstLook(poller, what, fetch) {
  try {
    return await fetch();
  } catch (e) {
    if (!(e instanceof ToolFailed)) throw e;
    poller.part("missing", poller.route.id, () => missing(what, poller.route.id, e.message));
    return null;
  }
}

function notice(message, kind = "error") {
  const el = document.getElementById("notice");
  el.textContent = message || "";
  el.className = message ? `notice ${kind}` : "notice";
}

function pathOf(route) {
  if (route.view === "run") return `/ui/runs/${encodeURIComponent(route.id)}`;
  if (route.view === "session") return `/ui/sessions/${encodeURIComponent(route.id)}`;
  const q = new URLSearchParams(Object.entries(route.filters || {}).filter(([, v]) => v));
  return `/ui${q.toString() ? `?${q}` : ""}`;
}

function routeOfLocation() {
  const parts = location.pathname.replace(/\/+$/, "").split("/").map(decodeURIComponent);
  if (parts[2] === "runs" && parts[3]) return { view: "run", id: parts[3] };
  if (parts[2] === "sessions" && parts[3]) return { view: "session", id: parts[3] };
  const q = new URLSearchParams(location.search);
  return { view: "runs", filters: { status: q.get("status") || "", workflow: q.get("workflow") || "" } };
}

function go(event, route) {
  if (event) event.preventDefault();
  if (embedded) history_.push(page ? page.route : null);
  else history.pushState(null, "", pathOf(route));
  show(route);
}

function show(route, initial) {
  if (page) page.stop();
  notice("");
  root.replaceChildren();
  if (embedded && history_.length && history_[history_.length - 1]) {
    root.append(h("button.back", { type: "button", onclick: () => show(history_.pop()) }, "← back"));
  }
  const Page = route.view === "run" ? RunPage : route.view === "session" ? SessionPage : RunsPage;
  page = new Page(route, initial);
  page.start();
}

class Poller {
  constructor(route) {
    this.route = route;
    this.timer = null;
    this.stopped = false;
    this.el = h("div.page");
    root.append(this.el);
  }
  start() {
    this.tick();
  }
  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
  }
  // One refresh at a time; a refresh asked for meanwhile (a button press) runs right after it.
  // refresh() answers when to look again: ms, true for the default, false when nothing will change.
  async tick() {
    if (this.stopped) return;
    if (this.busy) {
      this.rerun = true;
      return;
    }
    this.busy = true;
    clearTimeout(this.timer);
    let next = false;
    try {
      next = await this.refresh();
    } catch (e) {
      this.busy = false;
      if (e instanceof AuthRequired) return askToken(e.message);
      notice(e.message);
      next = true;
    }
    this.busy = false;
    if (this.stopped) return;
    if (this.rerun) {
      this.rerun = false;
      this.tick();
    } else if (next) {
      this.timer = setTimeout(() => this.tick(), next === true ? POLL_MS : next);
    }
  }
  // Re-render a part only when its data changed, so typing in a form is never clobbered.
  part(name, key, build) {
    this.keys = this.keys || {};
    this.slots = this.slots || {};
    if (!this.slots[name]) this.el.append((this.slots[name] = h("div", { dataset: { part: name } })));
    if (this.keys[name] === key) return;
    this.keys[name] = key;
    this.slots[name].replaceChildren(...[build()].flat().filter(Boolean));
  }
}

class RunPage extends Poller {
  constructor(route, initial) {
    super(route);
    this.run = initial || null;
    this.events = [];
    this.lineage = null;
  }
  async refresh() {
    const id = this.route.id;
    const run = this.run ? await call("run_get", { run_id: id }) : await firstLook(this, "run", () => call("run_get", { run_id: id }));
    if (!run) return false;
    this.run = run;
    for (let limit = 500; ;) {
      const after = this.events.length ? this.events[this.events.length - 1].seq : 0;
      const got = await call("run_events", { run_id: id, after_seq: after, limit });
      if (got.uri && !got.events.length) {
        // a page over 256 KB comes as an artifact link instead: ask for fewer events at a time
        if (limit === 1) break;
        limit = Math.max(1, limit >> 2);
        continue;
      }
      this.events.push(...got.events);
      if (got.events.length < limit) break;
    }
    const effects = this.run.status === "needs_review" ? (await call("effect_list", { status: "ambiguous" })).effects.filter((e) => e.run_id === id) : [];
    this.artifacts = await call("artifact_list", { run_id: id, limit: 200 }).then((got) => got.artifacts, () => []); // no artifact.read: none shown
    const focus = this.run.output_session_id || this.run.session_id;
    const lineageKey = `${focus}|${this.run.status}`;
    if (focus && this.lineageKey !== lineageKey) {
      this.lineage = await call("session_lineage", { session_id: focus, depth: 20 });
      this.lineageKey = lineageKey;
    }
    this.render(effects);
    if (isSettled(this.run)) return false;
    // Nothing moves while a run waits on a human (and a button press refreshes at once): look less often.
    return this.run.status === "waiting" || this.run.status === "needs_review" ? WAITING_POLL_MS : POLL_MS;
  }
  render(effects) {
    const run = this.run;
    this.part("header", JSON.stringify(run), () => header(run, go));
    const pending = run.pending_interrupts || [];
    const actionKey = JSON.stringify([pending.map((i) => i.interrupt_id), effects.map((e) => e.effect_id)]);
    this.part("actions", actionKey, () =>
      pending.length || effects.length
        ? h("section.card.actions", { id: "actions" },
            h("h2", {}, "Waiting on you"),
            pending.map((i) => interruptCard(i, (btn, tool, args) => this.act(btn, tool, args))),
            effects.map((e) => effectCard(e, (btn, tool, args) => this.act(btn, tool, args))))
        : null,
    );
    this.part("timeline", `${this.events.length}`, () => timeline(run, this.events));
    this.part("artifacts", JSON.stringify(this.artifacts.map((a) => a.artifact_id)), () => artifactsCard(this.artifacts, embedded ? null : download));
    this.part("lineage", this.lineageKey || "", () => (this.lineage ? lineageCard(this.lineage, run, go) : null));
  }
  async act(button, tool, args) {
    const card = button.closest(".interrupt, .effect");
    card.querySelectorAll("button").forEach((b) => (b.disabled = true));
    try {
      await call(tool, args);
      notice(`${tool}: ${args.action || args.outcome} sent`, "ok");
      this.tick();
    } catch (e) {
      notice(e.message);
      card.querySelectorAll("button").forEach((b) => (b.disabled = false));
    }
  }
}

class SessionPage extends Poller {
  constructor(route, initial) {
    super(route);
    this.initial = initial;
  }
  async refresh() {
    const lineage = this.initial || (await firstLook(this, "session", () => call("session_lineage", { session_id: this.route.id, depth: 20 })));
    this.initial = null;
    if (!lineage) return false;
    this.part("title", lineage.session_id, () => h("h1", {}, "Session ", h("code", {}, lineage.session_id)));
    this.part("graph", JSON.stringify(lineage), () => [
      lineageCard(lineage, null, go),
      h("section.card", {}, h("h2", {}, "Sessions"), h("table.list", { id: "nodes" },
        h("tr", {}, ["session", "op", "chunks", "created"].map((t) => h("th", {}, t))),
        lineage.nodes.map((n) => h("tr", { dataset: { session: n.id } },
          h("td", {}, h("a", { href: pathOf({ view: "session", id: n.id }), onclick: (e) => go(e, { view: "session", id: n.id }) }, h("code", {}, short(n.id)))),
          h("td", {}, n.op), h("td", {}, n.length), h("td", {}, when(n.created_at)))))),
    ]);
    return false;
  }
}

class RunsPage extends Poller {
  async refresh() {
    const filters = this.route.filters || { status: "", workflow: "" };
    if (!this.workflows) this.workflows = (await call("workflow_list", {})).workflows.map((w) => w.name);
    const args = { limit: 100 };
    if (filters.status) args.status = filters.status;
    if (filters.workflow) args.workflow = filters.workflow;
    const { runs } = await call("run_list", args);
    this.part("filters", JSON.stringify([filters, this.workflows]), () => this.filters(filters));
    this.part("runs", JSON.stringify(runs), () => this.table(runs));
    return LIST_POLL_MS;
  }
  filters(filters) {
    const select = (name, options) =>
      h("label", {}, name, " ",
        h("select", { name, id: `filter-${name}`, onchange: (ev) => this.filter(name, ev.target.value) },
          h("option", { value: "" }, "all"),
          options.map((o) => h("option", { value: o, selected: o === filters[name] }, o))));
    return h("section.card.filters", {}, h("h1", {}, "Runs"), select("status", STATUSES), select("workflow", this.workflows));
  }
  filter(name, value) {
    const filters = { ...(this.route.filters || {}), [name]: value };
    if (!embedded) history.replaceState(null, "", pathOf({ view: "runs", filters }));
    show({ view: "runs", filters });
  }
  table(runs) {
    return h("section.card", {}, h("table.list", { id: "runs" },
      h("tr", {}, ["run", "workflow", "status", "step", "updated", "elapsed"].map((t) => h("th", {}, t))),
      runs.map((r) => h("tr", { dataset: { run: r.run_id, status: r.status } },
        h("td", {}, runLink(r.run_id, go)), h("td", {}, r.workflow), h("td", {}, badge(r.status)),
        h("td", {}, r.step || "—"), h("td", {}, when(r.updated_at)), h("td", {}, duration(r.updated_at - r.created_at))))),
      runs.length ? null : h("p.muted", {}, "No runs match."));
  }
}

// A download link's bytes come through fetch (which can send the token), then are saved under the
// artifact's name from a blob: URL.
async function download(event, artifact) {
  event.preventDefault();
  try {
    const response = await fetchWithToken(event.currentTarget.getAttribute("href"));
    const url = URL.createObjectURL(await response.blob());
    const link = h("a", { href: url, download: artifact.name });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  } catch (e) {
    if (e instanceof AuthRequired) return askToken(e.message);
    notice(`${artifact.name}: ${e.message}`);
  }
}

function askToken(why) {
  if (page) page.stop();
  const input = h("input", { type: "password", id: "token", placeholder: "bearer token", "aria-label": "token" });
  root.replaceChildren(h("form.card", { id: "login", onsubmit: (ev) => { ev.preventDefault(); setToken(input.value.trim()); client = new HttpClient("/mcp"); show(routeOfLocation()); } },
    h("h1", {}, "A token is needed"), h("p.muted", {}, `${why}. Paste a token (rath-mcp token create …), or open this page as /ui#token=…`), input, h("button", { type: "submit" }, "Use token")));
}

function applyHostContext(context) {
  if (!context) return;
  if (context.theme) document.documentElement.dataset.theme = context.theme;
  const variables = (context.styles && context.styles.variables) || {};
  for (const [name, value] of Object.entries(variables)) if (value) document.documentElement.style.setProperty(name, value);
}

function routeOfToolResult(result, input) {
  const data = (result && result.structuredContent) || {};
  if (result && result.isError) return { error: (result.content || []).map((c) => c.text || "").join("\n") };
  if (Array.isArray(data.nodes) && data.session_id) return { route: { view: "session", id: data.session_id }, initial: data };
  const runId = data.run_id || (input && input.run_id);
  if (runId) return { route: { view: "run", id: runId }, initial: data.run_id ? data : null };
  return { error: "this tool result names no run or session" };
}

async function bootEmbedded() {
  const bridge = new AppsBridge();
  client = bridge;
  let input = null;
  bridge.on("ui/notifications/tool-input", (params) => {
    input = params.arguments || {};
    if (!page && input.run_id) show({ view: "run", id: input.run_id }); // start before the result arrives
  });
  bridge.on("ui/notifications/tool-result", (params) => {
    const found = routeOfToolResult(params, input);
    if (found.error) return notice(found.error);
    if (!page || page.route.id !== found.route.id) show(found.route, found.initial);
  });
  bridge.on("ui/notifications/host-context-changed", applyHostContext);
  bridge.on("ui/notifications/tool-cancelled", (params) => notice(`the tool call was cancelled: ${params.reason || ""}`));
  bridge.onTeardown = () => page && page.stop();
  root.replaceChildren(h("p.muted", {}, "Waiting for the tool result…"));
  const init = await bridge.connect();
  applyHostContext(init.hostContext);
}

function bootBrowser() {
  takeTokenFromFragment();
  client = new HttpClient("/mcp");
  window.addEventListener("popstate", () => show(routeOfLocation()));
  show(routeOfLocation());
}

document.documentElement.dataset.mode = embedded ? "app" : "browser";
if (embedded) bootEmbedded().catch((e) => notice(e.message));
else bootBrowser();
