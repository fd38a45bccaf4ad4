// The job's web UI: one document, a page per hash route, each polling the
// JSON API of the admin listener (docs/api.yaml) and nothing else.
// Everything from the API is written as text (textContent), never as
// markup. The admin token lives in this script's memory only.
"use strict";

const POLL_MS = 2000;
const TAIL_POLL_MS = 5000;

// ---- formatting: numbers with units, times in the viewer's zone ----

const nf = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
const nf1 = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 });
const nf2 = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });

function num(n) { return n == null ? "—" : nf.format(n); }
function recs(n) { return n == null ? "—" : nf.format(n) + (n === 1 ? " record" : " records"); }
function rate(r) { return r == null ? "—/s" : (r < 10 && r > 0 ? nf1 : nf).format(r) + " rec/s"; }
function bytes(b) {
  if (b == null) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (b >= 1024 && i < units.length - 1) { b /= 1024; i++; }
  return (i === 0 ? nf : nf1).format(b) + " " + units[i];
}
function ms(v) {
  if (v == null) return "—";
  if (v >= 1000) return nf2.format(v / 1000) + " s";
  return (v < 10 ? nf2 : nf1).format(v) + " ms";
}
function dur(seconds) {
  if (seconds == null || !isFinite(seconds)) return "—";
  seconds = Math.max(0, seconds);
  if (seconds < 1) return nf.format(seconds * 1000) + " ms";
  if (seconds < 60) return nf1.format(seconds) + " s";
  const d = Math.floor(seconds / 86400), h = Math.floor(seconds % 86400 / 3600), m = Math.floor(seconds % 3600 / 60), s = Math.floor(seconds % 60);
  if (d) return `${d} d ${h} h`;
  if (h) return `${h} h ${m} min`;
  return `${m} min ${s} s`;
}
function pct(f) { return f == null ? "—" : nf1.format(100 * f) + " %"; }
function isZeroTime(t) { return !t || t.startsWith("0001-01-01"); }

// time is an element showing t (RFC 3339) in the viewer's zone, UTC on
// hover.
function time(t, withDate) {
  if (isZeroTime(t)) return h("span", { class: "muted" }, "—");
  const d = new Date(t);
  const opts = withDate === false
    ? { hour: "2-digit", minute: "2-digit", second: "2-digit" }
    : { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" };
  return h("time", { datetime: d.toISOString(), title: d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC").replace(/Z$/, " UTC") },
    d.toLocaleString(undefined, opts));
}
function ago(t, now) {
  if (isZeroTime(t)) return "never";
  return dur(((now || Date.now()) - new Date(t).getTime()) / 1000) + " ago";
}

// ---- DOM ----

// h builds an element; strings become text nodes, never markup.
function h(tag, attrs, ...children) {
  const svg = tag.startsWith("svg:");
  const el = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c == null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
function fill(el, ...children) { el.replaceChildren(); for (const c of children.flat(Infinity)) if (c != null && c !== false) el.append(c instanceof Node ? c : document.createTextNode(String(c))); return el; }
function card(label, value, sub, attrs) {
  return h("div", Object.assign({ class: "card" }, attrs || {}), h("div", { class: "label" }, label), h("div", { class: "value" }, value), sub != null ? h("div", { class: "sub" }, sub) : null);
}
// table: head is [label or {label, num}], rows are arrays of cells (a cell
// is text, a node, or {v: content, num: true, attrs}).
function table(head, rows, caption, empty) {
  if (!rows.length && empty) return h("p", { class: "note" }, empty);
  return h("div", { class: "scroll" }, h("table", {},
    caption ? h("caption", { class: "muted" }, caption) : null,
    h("thead", {}, h("tr", {}, head.map(c => typeof c === "string" ? h("th", { scope: "col" }, c) : h("th", { scope: "col", class: c.num ? "num" : null }, c.label)))),
    h("tbody", {}, rows.map(r => h("tr", {}, r.map(c => (c && typeof c === "object" && !(c instanceof Node) && "v" in c)
      ? h("td", Object.assign({ class: c.num ? "num" : null }, c.attrs || {}), c.v)
      : h("td", {}, c)))))));
}

// ---- the API ----

let token = ""; // the admin token: memory only

async function api(path, opts) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), 15000);
  try {
    const res = await fetch(path, Object.assign({ signal: ctl.signal, cache: "no-store" }, opts || {}));
    let body = null;
    const type = res.headers.get("Content-Type") || "";
    if (type.includes("application/json")) body = await res.json();
    else body = await res.text();
    return { ok: res.ok, status: res.status, body };
  } finally {
    clearTimeout(timer);
  }
}

// rates keeps the previous answer of each view, so a total's rate is the
// difference over the time between two answers.
const prev = new Map();
function rateOf(view, key, value, at) {
  const k = view + "\u0000" + key, now = new Date(at).getTime(), p = prev.get(k);
  if (p && p.at === now) return p.rate; // the same answer again
  let r = null;
  if (p && value != null && p.value != null && now > p.at && value >= p.value) r = (value - p.value) / ((now - p.at) / 1000);
  prev.set(k, { value, at: now, rate: r });
  return r;
}

// ---- the frame: header, navigation, polling ----

const state = { page: null, job: null, timer: null, gen: 0, mounted: null };

function setBanner(msg) {
  const b = document.getElementById("banner");
  if (msg) { b.textContent = msg; b.hidden = false; } else { b.hidden = true; b.textContent = ""; }
}

function renderHeader(job) {
  document.getElementById("job-name").textContent = job.job;
  document.title = job.job + " · pipeline";
  const st = document.getElementById("job-state");
  st.textContent = job.state;
  st.className = "badge " + job.state;
  const facts = [job.guarantee, job.mode + " mode"];
  if (job.group) facts.push("instance " + job.group.instance);
  facts.push("up " + dur((Date.now() - new Date(job.started_at).getTime()) / 1000));
  fill(document.getElementById("job-facts"), facts.map(f => h("span", {}, f)));
}

function route() {
  const m = location.hash.match(/^#\/(\w+)/);
  const page = m && pages[m[1]] ? m[1] : "overview";
  if (state.page === page && state.mounted) return;
  state.page = page;
  state.gen++;
  for (const a of document.querySelectorAll("#nav a")) {
    if (a.dataset.page === page) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  const main = document.getElementById("main");
  const p = pages[page];
  fill(main, h("h1", {}, p.title));
  state.mounted = p.mount(main) || {};
  document.title = p.title + " · " + (state.job ? state.job.job : "pipeline");
  if (location.hash && location.hash !== "#/" + page) history.replaceState(null, "", "#/" + page);
  poll(true);
}

async function poll(now) {
  clearTimeout(state.timer);
  const gen = state.gen;
  const p = pages[state.page];
  try {
    const job = await api("/api/v1/job");
    if (!job.ok) throw new Error("GET /api/v1/job: " + job.status);
    state.job = job.body;
    renderHeader(job.body);
    const data = { job: job.body };
    for (const [name, path] of Object.entries(p.views || {})) {
      const r = await api(path);
      data[name] = r.ok ? r.body : { error: (r.body && r.body.error) || ("HTTP " + r.status) };
    }
    if (gen !== state.gen) return; // the page changed meanwhile
    p.update(state.mounted, data);
    setBanner("");
    fill(document.getElementById("updated"), "updated ", time(new Date().toISOString(), false));
  } catch (e) {
    if (gen !== state.gen) return;
    setBanner("The job's admin API does not answer (" + (e && e.message || e) + "); trying again.");
    const st = document.getElementById("job-state");
    st.textContent = "unreachable";
    st.className = "badge down";
  }
  if (gen === state.gen) state.timer = setTimeout(poll, p.every || POLL_MS);
}

// ---- pages ----

const pages = {};

// wholeJob is the job-wide view of a group-mode job of several processes
// (GET /api/v1/group), or null: single mode, one process, or it failed.
function wholeJob(group) {
  return group && !group.error && group.mode === "group" && group.processes.length > 1 ? group : null;
}

// jobNote says what the numbers are of, in group mode.
function jobNote(group) {
  const down = group.processes.filter(p => !p.reachable);
  return h("p", { class: down.length ? "warn" : "note", "data-field": "job-wide" },
    `The whole job: the sums of its ${group.processes.length} processes (${group.processes.map(p => p.instance + (p.self ? ", this one" : "")).join("; ")}).`,
    down.length ? ` Not counted: ${down.map(p => p.instance).join(", ")}, which did not answer (see the group page).` : "");
}

// processRows is a row per process of the job: who, where, its state and
// numbers, or why it is unreachable.
function processRows(group) {
  return group.processes.map(p => {
    const who = h("span", {}, h("code", {}, p.instance || "this process"), p.self ? h("span", { class: "muted" }, " (this one)") : null);
    if (!p.reachable) {
      return [who, h("code", {}, p.admin || "—"), { v: h("span", { class: "error" }, "unreachable: " + (p.error || "no answer")), attrs: { colspan: 6, "data-process": p.instance, "data-field": "unreachable" } }];
    }
    const f = p.flow, j = p.job, cp = j.checkpoint;
    const parts = j.group ? j.group.assigned.length : j.partitions.length;
    return [who, h("code", {}, p.admin || "—"), { v: j.state, attrs: { "data-process": p.instance, "data-field": "state" } },
      { v: num(parts), num: true, attrs: { "data-process": p.instance, "data-field": "partitions", "data-value": parts } },
      { v: h("span", {}, rate(rateOf("proc-in", p.instance, f.records_in, f.at)), h("br"), h("span", { class: "muted" }, recs(f.records_in))), num: true, attrs: { "data-process": p.instance, "data-field": "records-in", "data-value": f.records_in } },
      { v: h("span", {}, rate(rateOf("proc-out", p.instance, f.records_out, f.at)), h("br"), h("span", { class: "muted" }, recs(f.records_out))), num: true },
      { v: f.lag == null ? "—" : recs(f.lag), num: true },
      cp.last_completed ? h("span", {}, "#" + cp.last_completed + " ", h("span", { class: "muted" }, ago(cp.last_completed_at))) : "none yet"];
  });
}
const PROCESS_HEAD = ["Process", "Admin address", "State", { label: "Partitions", num: true }, { label: "Records in", num: true }, { label: "Records out", num: true }, { label: "Lag", num: true }, "Last checkpoint"];

pages.overview = {
  title: "Overview",
  views: { flow: "/api/v1/flow", group: "/api/v1/group" },
  mount(main) {
    const m = { note: h("div"), cards: h("div", { class: "cards", id: "overview-cards" }), error: h("div"), procs: h("div"), restarts: h("div"), io: h("div") };
    main.append(m.note, m.cards, m.error, m.procs, h("h2", {}, "Restarts"), m.restarts, h("h2", {}, "Topics"), m.io);
    return m;
  },
  update(m, { job, flow, group }) {
    if (flow.error) { fill(m.cards, h("p", { class: "error" }, flow.error)); return; }
    const whole = wholeJob(group);
    const view = whole ? "flow-job" : "flow";
    if (whole) flow = whole.flow;
    fill(m.note, whole ? jobNote(whole) : null);
    fill(m.procs, whole ? [h("h2", {}, "Processes"), table(PROCESS_HEAD, processRows(whole))] : null);
    const rin = rateOf(view, "in", flow.records_in, flow.at), rout = rateOf(view, "out", flow.records_out, flow.at);
    const cp = job.checkpoint;
    fill(m.cards,
      card("State", job.state, job.error ? "see the last error below" : null, { "data-field": "state" }),
      card("Guarantee", job.guarantee, job.mode + " mode, " + job.topology.workers + " workers"),
      card("Uptime", dur((Date.now() - new Date(job.started_at).getTime()) / 1000), h("span", {}, "since ", time(job.started_at))),
      card("Records in", rate(rin), recs(flow.records_in), { "data-field": "records-in", "data-value": flow.records_in }),
      card("Records out", rate(rout), recs(flow.records_out), { "data-field": "records-out", "data-value": flow.records_out }),
      card("Lag", flow.lag == null ? "—" : recs(flow.lag), flow.lag == null ? "not reported yet" : flow.lag_partitions.length + " partitions", { "data-field": "lag" }),
      card("Dead letters", num(flow.dead_letters), Object.entries(flow.dead_letters_by_code).filter(([, n]) => n > 0).map(([c, n]) => c + " " + num(n)).join(", ") || "none", { "data-field": "dead-letters", "data-value": flow.dead_letters }),
      job.guarantee === "at_most_once"
        ? card("Checkpoints", "none", "at_most_once keeps no checkpoints")
        : card("Last checkpoint", cp.last_completed ? "#" + cp.last_completed : "none yet", h("span", {}, ago(cp.last_completed_at), " · every ", cp.interval)),
      card("Restarts", num(job.restarts), Object.entries(flow.restarts_by_reason).filter(([, n]) => n > 0).map(([r, n]) => r + " " + num(n)).join(", ") || "none"),
    );
    fill(m.error, job.error ? [h("h2", {}, "Last error"), h("pre", { class: "error" }, job.error)] : null);
    fill(m.restarts, table(["When", "Reason", "Error"],
      job.recent_restarts.slice().reverse().map(r => [time(r.at), r.reason, h("span", { class: "error" }, r.error)]), null, "No restart since this process started."));
    fill(m.io, table(["Topic", "Kind", { label: "Records", num: true }, { label: "Rate", num: true }, { label: "Bytes", num: true }],
      flow.inputs.concat(flow.outputs).map(t => [h("code", {}, t.topic), t.kind.replace("_", " "), { v: num(t.records), num: true },
        { v: rate(rateOf(view, t.kind + ":" + t.topic, t.records, flow.at)), num: true }, { v: bytes(t.bytes), num: true }]), null, "No topic yet."));
  },
};

// layout places the graph's nodes in columns: each after its inputs,
// sinks in the last.
function layout(nodes) {
  const col = [];
  let last = 0;
  for (const n of nodes) {
    col[n.index] = n.kind === "source" ? 0 : Math.max(0, ...n.inputs.map(i => col[i] + 1));
    if (n.kind !== "sink") last = Math.max(last, col[n.index]);
  }
  for (const n of nodes) if (n.kind === "sink") col[n.index] = last + 1;
  const rows = [];
  const pos = [];
  for (const n of nodes) {
    const c = col[n.index];
    rows[c] = (rows[c] || 0);
    pos[n.index] = { col: c, row: rows[c]++ };
  }
  return { pos, cols: Math.max(...col) + 1, rows: Math.max(...rows) };
}

const NODE_W = 230, NODE_H = 92, GAP_X = 70, GAP_Y = 26, PAD = 16;

function short(s, n) { return s.length > n ? s.slice(0, n - 1) + "…" : s; }

pages.graph = {
  title: "Job graph",
  views: { graph: "/api/v1/graph", group: "/api/v1/group" },
  mount(main) {
    const m = { note: h("div"), box: h("div", { class: "graph" }), table: h("div"), tasks: h("div"), nodes: null, selected: null, detail: h("div", { class: "result", "aria-live": "polite" }) };
    main.append(
      h("p", { class: "note" }, "Each box is a source, step or sink of the configuration; rates are over the last few seconds. Blocked is the share of the time the tasks running it waited for room downstream (backpressure). Tab to a box and press Enter for its numbers."),
      m.note, m.box, m.detail, h("h2", {}, "Operators"), m.table, h("h2", {}, "Tasks"), m.tasks);
    return m;
  },
  build(m, g) {
    const { pos, cols, rows } = layout(g.nodes);
    const W = PAD * 2 + cols * NODE_W + (cols - 1) * GAP_X, H = PAD * 2 + rows * NODE_H + (rows - 1) * GAP_Y;
    const xy = i => ({ x: PAD + pos[i].col * (NODE_W + GAP_X), y: PAD + pos[i].row * (NODE_H + GAP_Y) });
    const svg = h("svg:svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "group", "aria-label": "The job graph" },
      h("svg:defs", {}, h("svg:marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, h("svg:path", { d: "M 0 0 L 10 5 L 0 10 z" }))));
    for (const n of g.nodes) {
      for (const o of n.outputs) {
        const a = xy(n.index), b = xy(o);
        const x1 = a.x + NODE_W, y1 = a.y + NODE_H / 2, x2 = b.x, y2 = b.y + NODE_H / 2, mx = (x1 + x2) / 2;
        svg.append(h("svg:path", { class: "edge", d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`, "marker-end": "url(#arrow)" }));
      }
    }
    m.nodes = [];
    for (const n of g.nodes) {
      const { x, y } = xy(n.index);
      const keyed = n.step_kind === "aggregate" || n.step_kind === "window";
      const label = n.kind === "step" ? n.step_kind.replace("_", " ") : n.kind;
      const t = { rate: h("svg:text", { x: x + 10, y: y + 58, class: "rate" }), extra: h("svg:text", { x: x + 10, y: y + 78, class: "small" }) };
      const title = n.kind === "sink" ? n.topics[0] : n.id;
      const gEl = h("svg:g", { class: "node " + (keyed ? "keyed" : n.kind), tabindex: 0, role: "button", "data-node": n.id, "aria-label": `${label} ${title}` },
        h("svg:title", {}, `${label} ${title}: ${n.detail}`),
        h("svg:rect", { x, y, width: NODE_W, height: NODE_H, rx: 8 }),
        h("svg:text", { x: x + 10, y: y + 20, class: "title" }, short(title, 24)),
        h("svg:text", { x: x + NODE_W - 10, y: y + 20, class: "small", "text-anchor": "end" }, label),
        h("svg:text", { x: x + 10, y: y + 38, class: "small" }, short(n.detail || n.path, 34)),
        t.rate, t.extra);
      const select = () => { m.selected = n.index; this.showDetail(m); for (const o of m.nodes) o.el.classList.toggle("selected", o.index === m.selected); };
      gEl.addEventListener("click", select);
      gEl.addEventListener("keydown", e => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); select(); } });
      m.nodes.push({ index: n.index, el: gEl, t });
      svg.append(gEl);
    }
    fill(m.box, svg);
    m.shape = JSON.stringify(g.nodes.map(n => [n.id, n.inputs, n.outputs]));
  },
  showDetail(m) {
    const n = m.g && m.g.nodes[m.selected];
    if (!n) { fill(m.detail); return; }
    const r = m.rates[n.index];
    fill(m.detail, h("h2", {}, (n.kind === "step" ? n.step_kind.replace("_", " ") : n.kind) + " " + (n.kind === "sink" ? n.topics[0] : n.id)),
      table(["What", "Value"], [
        ["Path", h("code", {}, n.path)], ["Does", h("code", {}, n.detail || "—")], ["Topics", n.topics.join(", ") || "—"], ["Runs in", n.runs_in],
        ["Records in", n.records_in == null ? "—" : recs(n.records_in)],
        [n.kind === "step" && n.records_in != null ? "Records passed on" : "Records", recs(n.records)], ["Rate", rate(r)],
        ["Dropped", n.dropped == null ? "—" : recs(n.dropped)],
        ["Dead letters", num(n.dead_letters)], ["Late records", num(n.late)], ["Keys held", num(n.keys)], ["State", bytes(n.state_bytes)],
        ["Windows open", num(n.windows_open)], ["Blocked", n.runs_in === "sink" ? "not measured" : pct(m.blocked[n.index])]]),
      m.whole ? [h("h3", {}, "By process"), table(["Process", { label: "Records", num: true }, { label: "Rate", num: true }, { label: "Dead letters", num: true }, { label: "Keys", num: true }],
        m.whole.processes.map(p => {
          const pn = p.reachable ? p.graph.nodes.find(x => x.index === n.index && x.id === n.id) : null;
          if (!pn) return [h("code", {}, p.instance), { v: h("span", { class: "error" }, "unreachable"), attrs: { colspan: 4 } }];
          return [h("code", {}, p.instance), { v: num(pn.records), num: true, attrs: { "data-process": p.instance, "data-node": n.id, "data-value": pn.records } },
            { v: rate(rateOf("proc-graph", p.instance + "#" + n.index, pn.records, p.graph.at)), num: true }, { v: num(pn.dead_letters), num: true }, { v: num(pn.keys), num: true }];
        }))] : null);
  },
  update(m, { graph, group }) {
    if (graph.error) { fill(m.box, h("p", { class: "error" }, graph.error)); return; }
    m.whole = wholeJob(group);
    const view = m.whole ? "graph-job" : "graph";
    if (m.whole) graph = m.whole.graph;
    fill(m.note, m.whole ? jobNote(m.whole) : null);
    if (m.shape !== JSON.stringify(graph.nodes.map(n => [n.id, n.inputs, n.outputs]))) this.build(m, graph);
    m.g = graph;
    m.rates = {};
    m.blocked = {};
    for (const n of graph.nodes) {
      m.rates[n.index] = rateOf(view, n.id + "#" + n.index, n.records, graph.at);
      const b = rateOf(view + "-blocked", n.runs_in, n.blocked_seconds, graph.at);
      m.blocked[n.index] = b == null || !n.tasks ? null : Math.min(1, b / n.tasks);
    }
    for (const o of m.nodes) {
      const n = graph.nodes[o.index];
      fill(o.t.rate, n.records == null ? "—" : rate(m.rates[n.index]) + "  ·  " + num(n.records) + " total");
      const parts = [];
      if (n.records_in != null) parts.push("in " + num(n.records_in));
      if (n.dropped) parts.push("dropped " + num(n.dropped));
      if (n.dead_letters) parts.push("dead " + num(n.dead_letters));
      if (n.late != null) parts.push("late " + num(n.late));
      if (n.keys != null) parts.push("keys " + num(n.keys));
      if (n.windows_open != null) parts.push("open " + num(n.windows_open));
      if (n.runs_in !== "sink" && m.blocked[n.index] != null) parts.push("blocked " + pct(m.blocked[n.index]));
      fill(o.t.extra, parts.join(" · ") || " ");
      o.t.extra.classList.toggle("blocked-hi", (m.blocked[n.index] || 0) > 0.5);
    }
    fill(m.table, table(["Operator", "Kind", { label: "In", num: true }, { label: "Records", num: true }, { label: "Rate", num: true }, { label: "Dropped", num: true }, { label: "Dead letters", num: true }, { label: "Late", num: true }, { label: "Keys", num: true }, { label: "State", num: true }, { label: "Blocked", num: true }],
      graph.nodes.map(n => [h("code", {}, n.kind === "sink" ? n.id : n.id), n.kind === "step" ? n.step_kind : n.kind,
        { v: num(n.records_in), num: true, attrs: { "data-node": n.id, "data-field": "records_in", "data-value": n.records_in } },
        { v: n.records == null ? "—" : num(n.records), num: true, attrs: { "data-node": n.id, "data-field": "records", "data-value": n.records } },
        { v: n.records == null ? "—" : rate(m.rates[n.index]), num: true },
        { v: num(n.dropped), num: true, attrs: { "data-node": n.id, "data-field": "dropped", "data-value": n.dropped } },
        { v: num(n.dead_letters), num: true, attrs: { "data-node": n.id, "data-field": "dead_letters", "data-value": n.dead_letters } },
        { v: num(n.late), num: true }, { v: num(n.keys), num: true, attrs: { "data-node": n.id, "data-field": "keys", "data-value": n.keys } },
        { v: bytes(n.state_bytes), num: true }, { v: n.runs_in === "sink" ? "—" : pct(m.blocked[n.index]), num: true }])));
    fill(m.tasks, table(["Task", { label: "Blocked in total", num: true }, { label: "Blocked now", num: true }],
      graph.tasks.map(t => [t.task, { v: dur(t.blocked_seconds), num: true }, { v: pct(rateOf("task", t.task, t.blocked_seconds, graph.at)), num: true }]), null, "No task runs (at_most_once, or not started)."));
    if (m.selected != null) this.showDetail(m);
  },
};

// chart draws the checkpoints as bars over time: alignment, commit and
// the rest of each one's duration, failures as red marks.
function checkpointChart(cps, fails) {
  const W = 900, H = 220, L = 56, R = 10, T = 10, B = 28;
  const all = cps.map(c => new Date(c.completed_at).getTime()).concat(fails.map(f => new Date(f.at).getTime()));
  if (!all.length) return h("p", { class: "note" }, "No checkpoint yet.");
  const t0 = Math.min(...all), t1 = Math.max(...all, t0 + 1000);
  const maxD = Math.max(1, ...cps.map(c => c.duration_ms));
  const bw = Math.max(2, Math.min(14, (W - L - R) / Math.max(cps.length, 1) * 0.7));
  const x = t => L + bw + (W - L - R - 2 * bw) * (t - t0) / (t1 - t0);
  const svg = h("svg:svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `Checkpoint durations over time: ${cps.length} completed, ${fails.length} failed; the longest ${ms(maxD)}` },
    h("svg:line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }),
    h("svg:line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }),
    h("svg:text", { x: L - 6, y: T + 10, "text-anchor": "end" }, ms(maxD)),
    h("svg:text", { x: L - 6, y: H - B, "text-anchor": "end" }, "0"),
    h("svg:text", { x: L, y: H - 8 }, new Date(t0).toLocaleTimeString()),
    h("svg:text", { x: W - R, y: H - 8, "text-anchor": "end" }, new Date(t1).toLocaleTimeString()));
  for (const c of cps) {
    const cx = x(new Date(c.completed_at).getTime()) - bw / 2;
    const a = Math.min(c.alignment_ms, c.duration_ms), k = Math.min(c.commit_ms, c.duration_ms - a), rest = Math.max(0, c.duration_ms - a - k);
    let top = H - B;
    for (const [cls, v] of [["align", a], ["commit", k], ["rest", rest]]) {
      const hgt = (H - B - T) * v / maxD;
      top -= hgt;
      svg.append(h("svg:rect", { class: cls, x: cx, y: top, width: bw, height: Math.max(0, hgt) }, h("svg:title", {}, `checkpoint ${c.id}: ${ms(c.duration_ms)} (alignment ${ms(c.alignment_ms)}, commit ${ms(c.commit_ms)})`)));
    }
  }
  for (const f of fails) {
    const fx = x(new Date(f.at).getTime());
    svg.append(h("svg:rect", { class: "fail", x: fx - 2, y: T, width: 4, height: H - B - T }, h("svg:title", {}, `checkpoint ${f.id} failed: ${f.reason}`)));
  }
  return svg;
}

pages.checkpoints = {
  title: "Checkpoints",
  views: { cps: "/api/v1/checkpoints" },
  mount(main) {
    const m = { chart: h("div", { class: "chart" }), list: h("div"), fails: h("div") };
    main.append(h("p", { class: "note" }, "A checkpoint commits the epoch's outputs, state changes and offsets in one transaction. Its duration runs from the trigger to the commit: the alignment (waiting for every task's barrier), the commit's round trip, and the rest (flushing what the epoch wrote)."),
      h("div", { class: "legend" }, h("span", {}, h("i", { class: "align" }), "alignment"), h("span", {}, h("i", { class: "commit" }), "commit"), h("span", {}, h("i", { class: "rest" }), "the rest"), h("span", {}, h("i", { class: "fail" }), "failed")),
      m.chart, h("h2", {}, "Failed"), m.fails, h("h2", {}, "Completed"), m.list);
    return m;
  },
  update(m, { job, cps }) {
    if (cps.error) { fill(m.list, h("p", { class: "error" }, cps.error)); return; }
    if (job.guarantee === "at_most_once") { fill(m.chart, h("p", { class: "note" }, "at_most_once keeps no checkpoints.")); return; }
    fill(m.chart, checkpointChart(cps.checkpoints, cps.failures));
    fill(m.fails, table(["Checkpoint", "When", "Reason", "Error"], cps.failures.map(f => ["#" + f.id, time(f.at), f.reason, h("span", { class: "error" }, f.error || "")]), null, "None failed since this process started."));
    fill(m.list, table([{ label: "Checkpoint", num: true }, "Completed", { label: "Duration", num: true }, { label: "Alignment", num: true }, { label: "Commit", num: true }, { label: "State written", num: true }, { label: "Records out", num: true }],
      cps.checkpoints.map(c => [{ v: "#" + c.id, num: true, attrs: { "data-checkpoint": c.id } }, time(c.completed_at), { v: ms(c.duration_ms), num: true }, { v: ms(c.alignment_ms), num: true }, { v: ms(c.commit_ms), num: true }, { v: bytes(c.state_bytes), num: true }, { v: num(c.outputs), num: true }]),
      `The last ${cps.checkpoints.length} completed, newest first; one every ${cps.interval}.`, "None completed yet."));
  },
};

pages.eventtime = {
  title: "Event time",
  views: { et: "/api/v1/eventtime" },
  mount(main) {
    const m = { cards: h("div", { class: "cards" }), parts: h("div"), wins: h("div") };
    main.append(m.cards, h("h2", {}, "Partitions"), m.parts, h("h2", {}, "Windows"), m.wins);
    return m;
  },
  update(m, { et }) {
    if (et.error) { fill(m.cards, h("p", { class: "error" }, et.error)); return; }
    if (!et.enabled) { fill(m.cards, h("p", { class: "note" }, "No source of this job has event_time: it has no watermark and no windows.")); fill(m.parts); fill(m.wins); return; }
    fill(m.cards,
      card("Watermark", et.watermark ? time(et.watermark) : "none yet", et.lag_seconds != null ? dur(et.lag_seconds) + " behind the clock" : "every partition must have a record first"),
      card("Late records", num(et.late_side_output + et.late_dropped), `${num(et.late_side_output)} to the late topic, ${num(et.late_dropped)} dropped`));
    fill(m.parts, table(["Topic", { label: "Partition", num: true }, "Watermark", "Idle"],
      et.partitions.map(p => [h("code", {}, p.topic), { v: p.partition, num: true }, p.watermark ? time(p.watermark) : "no record yet", p.idle ? "idle: not holding the watermark back" : "no"]), null, "No partition has reported yet (at the next checkpoint)."));
    fill(m.wins, table(["Operator", "Window", { label: "Open", num: true }, { label: "Fired", num: true }, { label: "Late", num: true }],
      et.windows.map(w => [h("code", {}, w.operator), w.shape, { v: num(w.open), num: true }, { v: num(w.fired), num: true }, { v: num(w.late), num: true }]), null, "The job has no window step."));
  },
};

// byTopic groups "topic/partition" names: a row per topic.
function byTopic(names) {
  const m = new Map();
  for (const n of names) {
    const i = n.lastIndexOf("/");
    const t = n.slice(0, i);
    if (!m.has(t)) m.set(t, []);
    m.get(t).push(Number(n.slice(i + 1)));
  }
  return [...m].map(([t, ps]) => [h("code", {}, t), { v: ps.length, num: true }, ps.sort((a, b) => a - b).join(", ")]);
}

pages.group = {
  title: "Group",
  views: { group: "/api/v1/group" },
  mount(main) {
    const m = { body: h("div") };
    main.append(m.body);
    return m;
  },
  update(m, { job, group }) {
    const parts = table(["Topic", { label: "Partition", num: true }, { label: "Started at offset", num: true }],
      job.partitions.map(p => [h("code", {}, p.topic), { v: p.partition, num: true }, { v: num(p.start_offset), num: true }]), null, "No partition assigned yet.");
    if (!job.group) {
      fill(m.body, h("p", {}, "Single mode: this process runs the whole job. It owns every partition of its sources and all ",
        num(job.topology.key_groups), " key groups, spread over ", num(job.topology.workers), " workers."), h("h2", {}, "Partitions"), parts);
      return;
    }
    const g = job.group;
    const whole = wholeJob(group);
    const owned = p => p.reachable && p.job.group ? p.job.group : null;
    fill(m.body,
      h("p", { class: "note" }, "Group mode: processes share the job through its consumer group. Each process is asked for its numbers at the admin address it advertised to the group (admin.advertise); one that does not answer is shown as unreachable. Below the processes, this process's own view."),
      whole ? [h("h2", {}, "Processes"), table(PROCESS_HEAD, processRows(whole)),
        h("h2", {}, "Who owns what"), table(["Process", "Partitions", "Key groups", { label: "Generation", num: true }],
          whole.processes.map(p => {
            const og = owned(p);
            if (!og) return [h("code", {}, p.instance), { v: h("span", { class: "error" }, p.reachable ? "no assignment yet" : "unreachable: " + (p.error || "no answer")), attrs: { colspan: 3 } }];
            return [h("code", {}, p.instance), { v: byTopic(og.assigned).map(([t, , ps]) => h("div", {}, t, " ", ps)), attrs: { "data-process": p.instance, "data-field": "assigned" } },
              og.key_groups.map(r => `[${r.start}, ${r.end})`).join(" ") || "—", { v: num(og.generation), num: true }];
          }))] : (group && group.error ? h("p", { class: "error" }, "The other processes could not be asked: " + group.error) : null),
      h("h2", {}, "This process"),
      h("div", { class: "cards" }, card("Instance", g.instance, g.member_id), card("Generation", num(g.generation)), card("Members", num(g.members.length), g.members.join(", ")),
        card("Key groups owned", num(g.key_groups.reduce((s, r) => s + r.end - r.start, 0)), "of " + num(job.topology.key_groups))),
      h("h2", {}, "Assigned partitions"), table(["Topic", { label: "Partitions", num: true }, "Which"], byTopic(g.assigned), null, "None assigned."),
      h("h2", {}, "Key groups"), table([{ label: "Repartition partition", num: true }, "Key groups"], g.key_groups.map(r => [{ v: r.partition, num: true }, `[${r.start}, ${r.end})`]), null, "None: this process owns no repartition partition."),
      h("h2", {}, "Rebalances"), table(["When", { label: "Generation", num: true }, "Members", { label: "Partitions", num: true }],
        g.rebalances.slice().reverse().map(r => [time(r.at), { v: r.generation, num: true }, r.members.join(", "), { v: r.partitions, num: true }])),
      h("h2", {}, "Source partitions read since the last restore"), parts);
  },
};

function tailTable(t, kind) {
  if (t.error) return h("p", { class: "error" }, t.error);
  const hdr = (r, k) => { const x = r.headers.find(x => x.key === k); return x ? x.value : ""; };
  const rows = t.records.map(r => {
    const src = hdr(r, "pipeline.source.topic");
    const where = src ? `${src}/${hdr(r, "pipeline.source.partition")}@${hdr(r, "pipeline.source.offset")}` : "";
    const marks = [r.truncated ? `cut from ${bytes(r.value_bytes)}` : null, r.escaped ? "bytes not UTF-8 shown as \\xNN" : null].filter(Boolean).join("; ");
    const headers = r.headers.filter(x => !x.key.startsWith("pipeline.source.") && x.key !== "pipeline.error.code" && x.key !== "pipeline.error.step" && x.key !== "pipeline.error.reason");
    return [time(r.timestamp), h("code", {}, `${r.topic}/${r.partition}@${r.offset}`),
      kind === "dead" ? h("span", {}, h("strong", {}, hdr(r, "pipeline.error.code")), h("br"), h("code", {}, hdr(r, "pipeline.error.step"))) : null,
      h("code", {}, where),
      h("div", {}, kind === "dead" ? h("div", { class: "error" }, hdr(r, "pipeline.error.reason")) : null,
        r.key != null ? h("div", {}, "key ", h("code", {}, r.key)) : null,
        h("pre", {}, r.value), marks ? h("div", { class: "muted" }, marks) : null,
        headers.length ? h("div", { class: "muted" }, headers.map(x => x.key + "=" + x.value).join(", ")) : null)].filter(c => c !== null);
  });
  const head = kind === "dead" ? ["Written", "Record", "Code, step", "Read from", "Reason, key, value"] : ["Written", "Record", "Read from", "Key, value, window"];
  return h("div", {}, t.errors.map(e => h("p", { class: "error" }, e)),
    table(head, rows, `The newest ${t.records.length} committed records of ${t.topics.join(", ") || "no topic"}, newest first.`, t.topics.length ? "None: nothing has gone there." : "The job writes none."));
}

pages.deadletters = {
  title: "Dead letters and late records",
  every: TAIL_POLL_MS,
  views: { dead: "/api/v1/dead-letters?limit=50", late: "/api/v1/late-records?limit=50" },
  mount(main) {
    const m = { dead: h("div", { id: "dead-letters" }), late: h("div", { id: "late-records" }) };
    main.append(h("p", { class: "note" }, "Records the job could not use go to its dead-letter topics, with the reason in their headers; records too late for every window go to the late topics. Read with read_committed, as a consumer of the results would. Keys, values and headers are shown as text, cut to a length."),
      h("h2", {}, "Dead letters"), m.dead, h("h2", {}, "Late records"), m.late);
    return m;
  },
  update(m, { dead, late }) {
    fill(m.dead, tailTable(dead, "dead"));
    fill(m.late, tailTable(late, "late"));
  },
};

pages.savepoints = {
  title: "Savepoints",
  views: { sps: "/api/v1/savepoints" },
  mount(main) {
    const m = {};
    m.token = h("input", { id: "sp-token", type: "password", autocomplete: "off", spellcheck: "false", placeholder: "admin.token of the job", "aria-describedby": "sp-token-note" });
    m.token.value = token;
    m.token.addEventListener("input", () => { token = m.token.value; });
    m.dir = h("input", { id: "sp-dir", type: "text", autocomplete: "off", spellcheck: "false", value: "sp-" + new Date().toISOString().slice(0, 19).replace(/[:T]/g, "-") });
    m.result = h("div", { class: "result", role: "status", id: "sp-result" });
    m.create = h("button", { type: "submit", id: "sp-create" }, "Take a savepoint");
    m.stop = h("button", { type: "button", class: "danger", id: "sp-stop" }, "Stop the job with a savepoint");
    const go = async stop => {
      if (stop && !confirm("Stop the job after a savepoint? The process exits once the savepoint is complete.")) return;
      m.create.disabled = m.stop.disabled = true;
      fill(m.result, stop ? "Stopping the job with a savepoint…" : "Taking a savepoint at the next checkpoint…");
      try {
        const headers = { "Content-Type": "application/json" };
        if (token) headers.Authorization = "Bearer " + token;
        const r = await api("/api/v1/savepoints", { method: "POST", headers, body: JSON.stringify(stop ? { dir: m.dir.value, stop: true } : { dir: m.dir.value }) });
        if (r.ok) {
          const s = r.body.savepoint;
          fill(m.result, h("p", { class: "ok" }, `Savepoint ${s.dir} complete: checkpoint ${s.checkpoint_id}, ${num(s.keys)} keys, ${bytes(s.bytes)}.`, r.body.stopped ? " The job stopped." : ""), r.body.note ? h("p", { class: "warn" }, r.body.note) : null);
          m.dir.value = "sp-" + new Date().toISOString().slice(0, 19).replace(/[:T]/g, "-");
          poll();
        } else {
          fill(m.result, h("p", { class: "error" }, `Refused (${r.status}): ${r.body && r.body.error || r.body}`));
        }
      } catch (e) {
        fill(m.result, h("p", { class: "error" }, "The request failed: " + (e.message || e)));
      } finally {
        m.create.disabled = m.stop.disabled = false;
      }
    };
    m.stop.addEventListener("click", () => go(true));
    const form = h("form", { class: "sp", id: "sp-form" },
      h("label", { for: "sp-token" }, "Admin token"), m.token,
      h("span"), h("span", { class: "muted", id: "sp-token-note" }, "Sent in the Authorization header of the request only; kept in this page's memory, never stored."),
      h("label", { for: "sp-dir" }, "Directory"), m.dir,
      h("div", { class: "buttons" }, m.create, m.stop));
    form.addEventListener("submit", e => { e.preventDefault(); go(false); });
    m.where = h("p", { class: "note" });
    m.list = h("div", { id: "sp-list" });
    main.append(m.where, form, m.result, h("h2", {}, "Savepoints in the directory"), m.list);
    return m;
  },
  update(m, { job, sps }) {
    if (sps.error) { fill(m.list, h("p", { class: "error" }, sps.error)); return; }
    fill(m.where, "A savepoint is a complete snapshot of the job (state, offsets, key-group layout) in a directory below ", h("code", {}, sps.dir),
      " on the job's machine. Restore one with pipeline run --from-savepoint DIR.", sps.can_create ? "" : " Taking one is off: the job has no admin.token.");
    fill(m.list, table(["Name", "Created", "Job", { label: "Checkpoint", num: true }, { label: "Keys", num: true }, { label: "State", num: true }],
      sps.savepoints.map(s => s.error ? [h("code", {}, s.name), h("span", { class: "error" }, s.error), "", "", "", ""] :
        [h("code", { "data-savepoint": s.name }, s.name), time(s.created), s.job, { v: num(s.checkpoint_id), num: true }, { v: num(s.keys), num: true }, { v: bytes(s.bytes), num: true }]),
      null, "None yet."));
  },
};

pages.config = {
  title: "Configuration",
  every: 30000,
  views: { cfg: "/api/v1/config" },
  mount(main) {
    const m = { head: h("p", { class: "note" }), yaml: h("pre", { id: "config-yaml" }) };
    main.append(m.head, m.yaml);
    return m;
  },
  update(m, { cfg }) {
    if (cfg.error) { fill(m.yaml, cfg.error); return; }
    fill(m.head, "The configuration as the job runs it: ", h("code", {}, cfg.file || "(no file)"), " with every ${VAR} replaced and every default applied.",
      cfg.masked.length ? " Secrets are masked: " + cfg.masked.join(", ") + "." : " It sets no secret.");
    if (m.yaml.textContent !== cfg.yaml) fill(m.yaml, cfg.yaml);
  },
};

window.addEventListener("hashchange", route);
document.addEventListener("visibilitychange", () => { if (!document.hidden) poll(); });
route();
