// A run's page: header (workflow, status, step, timings, result, error, forked_from), what waits on a
// human (interrupts: Approve / Edit / Reject / Respond; effects: Applied / Not applied), the timeline
// of its events and checkpoints, the artifacts it kept, and its session's lineage.

import { badge, duration, h, json, short, when } from "./dom.js";
import { lineageSvg } from "./graph.js";

const TERMINAL = new Set(["succeeded", "failed", "cancelled", "timed_out"]);

export function isSettled(run) {
  return TERMINAL.has(run.status);
}

export function header(run, go) {
  const rows = [
    ["workflow", run.workflow],
    ["status", badge(run.status)],
    ["step", run.step || "—"],
    ["created", when(run.created_at)],
    ["updated", when(run.updated_at)],
    ["elapsed", duration(run.updated_at - run.created_at)],
    ["input session", sessionLink(run.session_id, go)],
    ["output session", sessionLink(run.output_session_id, go)],
  ];
  if (run.trace_id) rows.push(["trace", traceLink(run)]);
  if (run.forked_from) {
    const from = run.forked_from;
    rows.push(["forked from", h("span", {}, runLink(from.run_id, go), ` at checkpoint ${from.checkpoint_seq ?? "latest"}`)]);
  }
  return h("section.card.header", { id: "run-header", dataset: { status: run.status } },
    h("h1", {}, "Run ", h("code", {}, run.run_id)),
    h("dl", {}, rows.map(([k, v]) => [h("dt", {}, k), h("dd", { dataset: { field: k } }, v)])),
    run.result !== undefined && run.result !== null ? h("div.result", {}, h("h2", {}, "Result"), h("pre", { id: "run-result" }, json(run.result))) : null,
    run.error ? h("div.error", { id: "run-error" }, h("h2", {}, "Error"), h("pre", {}, run.error)) : null,
    run.hint ? h("p.hint", {}, run.hint) : null,
  );
}

// The run's OpenTelemetry trace id; a link into the team's trace UI when the server has RATH_TRACE_URL.
function traceLink(run) {
  const id = h("code", { id: "run-trace" }, run.trace_id);
  return run.trace_url ? h("a", { href: run.trace_url, target: "_blank", rel: "noopener noreferrer" }, id) : id;
}

function sessionLink(id, go) {
  return id ? h("a", { href: `/ui/sessions/${id}`, onclick: (e) => go(e, { view: "session", id }) }, h("code", {}, short(id))) : "—";
}

export function runLink(id, go) {
  return h("a", { href: `/ui/runs/${id}`, onclick: (e) => go(e, { view: "run", id }) }, h("code", {}, short(id)));
}

export function interruptCard(interrupt, act) {
  const value = h("textarea", { rows: 3, placeholder: "value (JSON or text) for Edit / Respond", "aria-label": "value" });
  const reason = h("input", { type: "text", placeholder: "reason (optional)", "aria-label": "reason" });
  const button = (action, label) =>
    h(`button.act.${action}`, {
      type: "button",
      dataset: { action, interrupt: interrupt.interrupt_id },
      onclick: (ev) => act(ev.currentTarget, "interrupt_resolve", decision(interrupt.interrupt_id, action, value.value, reason.value)),
    }, label);
  return h("div.interrupt", { dataset: { interrupt: interrupt.interrupt_id, kind: interrupt.kind } },
    h("div.row", {}, h("span.kind", {}, interrupt.kind), h("code", {}, interrupt.interrupt_id), h("span.muted", {}, `step ${interrupt.step}`)),
    h("p.prompt", {}, interrupt.prompt || "(no prompt)"),
    interrupt.schema ? h("details", {}, h("summary", {}, "expected answer (JSON Schema)"), h("pre", {}, json(interrupt.schema))) : null,
    value, reason,
    h("div.buttons", {}, button("approve", "Approve"), button("edit", "Edit"), button("reject", "Reject"), button("respond", "Respond")),
  );
}

function decision(interruptId, action, rawValue, reason) {
  const args = { interrupt_id: interruptId, action };
  if ((action === "edit" || action === "respond") && rawValue.trim()) args.value = parseLoose(rawValue);
  if (reason.trim()) args.reason = reason.trim();
  return args;
}

function parseLoose(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text; // plain words are a string answer
  }
}

export function effectCard(effect, act) {
  const result = h("textarea", { rows: 2, placeholder: "what it returned (JSON, for Applied)", "aria-label": "result" });
  const button = (outcome, label) =>
    h(`button.act.${outcome}`, {
      type: "button",
      dataset: { outcome, effect: effect.effect_id },
      onclick: (ev) => {
        const args = { effect_id: effect.effect_id, outcome };
        if (outcome === "applied" && result.value.trim()) args.result = parseLoose(result.value);
        act(ev.currentTarget, "effect_resolve", args);
      },
    }, label);
  return h("div.effect", { dataset: { effect: effect.effect_id } },
    h("div.row", {}, h("span.kind", {}, effect.effect_class), h("code", {}, effect.effect_id), h("span.muted", {}, `step ${effect.step} · ${effect.status}`)),
    h("p", {}, "Key ", h("code", {}, effect.key), effect.error ? ` — ${effect.error}` : ""),
    result,
    h("div.buttons", {}, button("applied", "Applied"), button("not_applied", "Not applied")),
  );
}

export function timeline(run, events) {
  const started = new Map();
  const items = events.map((event) => {
    const step = event.data && event.data.step;
    let extra = "";
    if (event.type === "step.started" && step) started.set(step, event.created_at);
    if (event.type === "step.completed" && started.has(step)) extra = ` · ${duration(event.created_at - started.get(step))}`;
    const kind = event.type.startsWith("checkpoint") ? "checkpoint" : event.type.split(".")[0];
    return h(`li.event.k-${kind}`, { dataset: { seq: event.seq, type: event.type } },
      h("span.dot", {}),
      h("span.seq", {}, `#${event.seq}`),
      h("span.at", {}, `+${duration(event.created_at - run.created_at)}`),
      h("span.type", {}, event.type),
      h("span.muted", {}, summarize(event.data) + extra),
    );
  });
  return h("section.card", { id: "timeline" }, h("h2", {}, `Timeline · ${events.length} events`), h("ol.timeline", {}, items));
}

function summarize(data) {
  if (!data || typeof data !== "object") return "";
  const parts = Object.entries(data).filter(([, v]) => v !== null && v !== undefined).map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`);
  const text = parts.join(" ");
  return text.length > 160 ? `${text.slice(0, 157)}…` : text;
}

export function lineageCard(lineage, run, go) {
  const svg = lineageSvg(lineage, {
    focus: lineage.session_id,
    input: run && run.session_id,
    output: run && run.output_session_id,
    onPick: (id) => go(null, { view: "session", id }),
  });
  return h("section.card", { id: "lineage" },
    h("h2", {}, `Lineage · ${lineage.nodes.length} sessions`),
    h("div.legend", {}, h("span.l-input", {}, "input"), h("span.l-output", {}, "output"), h("span.l-fork", {}, "fork"), h("span.l-merge", {}, "merge")),
    h("div.graph", {}, svg),
  );
}

// What the run kept (artifact_list run_id=…): name, type, size, and in a browser a download link
// (/ui/artifacts/{id}, fetched with the token by `download`); inside a host's frame, the resource URI.
export function artifactsCard(artifacts, download) {
  if (!artifacts.length) return null;
  const name = (a) =>
    download
      ? h("a.download", { href: `/ui/artifacts/${encodeURIComponent(a.artifact_id)}`, download: a.name, onclick: (e) => download(e, a) }, a.name)
      : h("span", { title: a.uri }, a.name);
  return h("section.card", { id: "artifacts" },
    h("h2", {}, `Artifacts · ${artifacts.length}`),
    h("table.list", {},
      h("tr", {}, ["name", "type", "size", "created"].map((t) => h("th", {}, t))),
      artifacts.map((a) => h("tr", { dataset: { artifact: a.artifact_id } },
        h("td", {}, name(a)), h("td", {}, a.mime_type), h("td", {}, bytes(a.size)), h("td", {}, when(a.created_at))))));
}

function bytes(n) {
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB"];
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}
