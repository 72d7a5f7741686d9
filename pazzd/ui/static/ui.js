// PAZZ live view: draws faults, paths and coverage over the server-drawn topology SVG.
// Data: the API's read-only JSON under /ui/api/ (the same answers as pazzctl --json),
// polled; nothing here changes pazzd.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const FAULT_POLL_MS = 2000;
const COVERAGE_POLL_MS = 5000;
const RESOLVED_KEPT = 20;

const S = {
  topo: null,
  ports: new Map(), // "dpid:port" -> {dpid, port, bits, peer: "dpid:port"|null, edge: name|null}
  byName: new Map(), // switch name -> dpid
  names: new Map(), // dpid -> switch name
  faults: new Map(), // open faults by id
  resolved: [], // faults seen open here, then resolved (newest first)
  selected: null, // fault id shown
  drawn: null, // what the map shows of it
  coverage: null,
  areaIngress: null,
};

// The view's token, from the page's URL (`pazzctl ui-url` prints it): sent with every
// request for data. pazzd makes a new one at each start.
const TOKEN = new URLSearchParams(location.search).get("token") || "";
const NO_TOKEN = "pazzd refused this page's token (pazzd restarted?): open the URL `pazzctl ui-url` prints";

async function get(path) {
  const r = await fetch(path, { cache: "no-store", headers: { Authorization: `Bearer ${TOKEN}` } });
  if (r.status === 401) throw new Error(NO_TOKEN);
  return r;
}

async function api(cmd, args) {
  const q = new URLSearchParams(args || {}).toString();
  const r = await get(`/ui/api/${cmd}` + (q ? `?${q}` : ""));
  const m = await r.json();
  if (!m.ok) throw new Error(m.error);
  return m.result;
}

function h(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.dataset[k.slice(5).replace(/-(.)/g, (_, c) => c.toUpperCase())] = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k);
  return e;
}

function s(tag, attrs, parent) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (parent) parent.append(e);
  return e;
}

const fmtTime = (t) => (t ? new Date(t * 1000).toLocaleTimeString() : "-");
const hex = (v, n) => "0x" + (Number(v) >>> 0).toString(16).padStart(n, "0");
const portText = (key) => {
  const [d, p] = key.split(":");
  return `${S.names.get(Number(d)) || d}:${p}`;
};

function fmtSeconds(x) {
  if (x === null || x === undefined) return "-";
  if (!isFinite(x)) return "∞";
  if (x < 1) return `${(x * 1000).toFixed(0)} ms`;
  if (x < 120) return `${x.toFixed(1)} s`;
  if (x < 7200) return `${(x / 60).toFixed(1)} min`;
  if (x < 172800) return `${(x / 3600).toFixed(1)} h`;
  return `${(x / 86400).toFixed(1)} d`;
}

// --- topology ---------------------------------------------------------------------------
async function loadTopology() {
  const svgText = await (await get("/ui/topology.svg")).text();
  const box = document.getElementById("topology");
  box.innerHTML = svgText;
  const svg = box.querySelector("svg");
  const defs = s("defs", {}, null);
  svg.prepend(defs);
  for (const k of ["expected", "actual", "trace"]) {
    const m = s("marker", { id: `arrow-${k}`, viewBox: "0 0 10 10", refX: "9", refY: "5",
      markerWidth: "6", markerHeight: "6", orient: "auto-start-reverse" }, defs);
    s("path", { d: "M 0 0 L 10 5 L 0 10 z", class: `arrow-${k}` }, m);
  }
  S.topo = await api("topology");
  for (const sw of S.topo.switches) {
    S.byName.set(sw.name, sw.dpid);
    S.names.set(sw.dpid, sw.name);
  }
  const key = (name) => {
    const i = name.lastIndexOf(":");
    return `${S.byName.get(name.slice(0, i))}:${name.slice(i + 1)}`;
  };
  for (const sw of S.topo.switches) {
    for (const p of sw.ports) {
      S.ports.set(`${sw.dpid}:${p.port}`, {
        dpid: sw.dpid, port: p.port, bits: parseInt(p.bits, 16) >>> 0,
        peer: p.peer ? key(p.peer) : null, edge: p.edge,
      });
    }
  }
  const sel = document.getElementById("trace-ingress");
  for (const e of S.topo.edges) {
    sel.append(h("option", { value: e.port }, `${e.port} (${e.name})`));
  }
  for (const g of svg.querySelectorAll("g.host")) {
    g.addEventListener("click", () => {
      sel.value = portText(g.dataset.port);
      showTab("trace");
    });
  }
}

function swPos(dpid) {
  const g = document.getElementById(`sw-${dpid}`);
  return g ? [Number(g.dataset.x), Number(g.dataset.y)] : null;
}

function hostPos(key) {
  const g = document.getElementById(`host-${key.replace(":", "-")}`);
  return g ? [Number(g.dataset.x), Number(g.dataset.y)] : null;
}

// One arrow along the link by which a packet entered (dpid, in_port), or left by the edge
// port key (out), offset sideways so that expected, actual and trace lie side by side.
function segment(key, cls, off, out) {
  const p = S.ports.get(key);
  if (!p) return null;
  const here = swPos(p.dpid);
  let there = null;
  if (p.edge !== null && p.edge !== undefined) there = hostPos(key);
  else if (p.peer) there = swPos(Number(p.peer.split(":")[0]));
  if (!here || !there) return null;
  let [a, b] = out ? [here, there] : [there, here];
  const dx = b[0] - a[0], dy = b[1] - a[1];
  const len = Math.hypot(dx, dy) || 1;
  const nx = (-dy / len) * off, ny = (dx / len) * off;
  const shrink = 0.2;
  const kind = cls.replace("ov-", "");
  return s("line", {
    class: `ov ${cls}`, "data-at": key, "data-dir": out ? "out" : "in",
    x1: a[0] + nx + dx * shrink, y1: a[1] + ny + dy * shrink,
    x2: b[0] + nx - dx * shrink, y2: b[1] + ny - dy * shrink,
    "marker-end": `url(#arrow-${kind})`,
  }, document.getElementById("overlay"));
}

function drawHops(hops, cls, off) {
  for (const hop of hops) segment(`${hop.dpid}:${hop.in_port}`, cls, off, false);
  const last = hops[hops.length - 1];
  if (last && last.out_port !== null && last.out_port !== undefined) {
    const k = `${last.dpid}:${last.out_port}`;
    const p = S.ports.get(k);
    if (p && p.edge !== null && p.edge !== undefined) segment(k, cls, off, true);
  }
  for (const hop of hops) {
    const g = document.getElementById(`sw-${hop.dpid}`);
    if (g) g.classList.add(`on-${cls.replace("ov-", "")}`);
  }
}

function clearOverlay(kinds) {
  for (const k of kinds) {
    for (const e of document.querySelectorAll(`#overlay .ov-${k}`)) e.remove();
    for (const e of document.querySelectorAll(`.on-${k}`)) e.classList.remove(`on-${k}`);
  }
}

// The ports whose three Bloom bits are all set in Verify_Port: where the packet entered
// switches (tester.detect.switches_in_filter; a Bloom filter may also name a port that
// was not crossed).
function portsInFilter(vp) {
  vp = Number(vp) >>> 0;
  const out = [];
  for (const [k, p] of S.ports) if (p.bits && ((vp & p.bits) >>> 0) === p.bits) out.push(k);
  return out;
}

// --- faults ------------------------------------------------------------------------------
// The switch a fault is drawn on: its localized entry's, else the audit's, else what the
// tester's location and candidates say.
function faultDpid(f) {
  if (f.polled && f.polled.dpid !== undefined && f.polled.dpid !== null) return f.polled.dpid;
  if (f.audit && f.audit.dpid !== undefined && f.audit.dpid !== null) return f.audit.dpid;
  const loc = String(f.location || "");
  let m = loc.match(/^dpid:(\d+)/) || loc.match(/^egress:(\d+):/);
  if (m) return Number(m[1]);
  const l = f.localization || {};
  if (l.culprit !== undefined && l.culprit !== null) return l.culprit;
  if (l.candidates && l.candidates.length) return l.candidates[0];
  m = loc.match(/^flow:(\d+):/);
  return m ? Number(m[1]) : null;
}

function finding(f) {
  if (f.polled && f.polled.finding) return f.polled;
  if (f.kind === "audit" && f.audit) return f.audit;
  return null;
}

// A fault waiting in memory for the fault store (saved: false) may have no id yet: its
// key is what makes it one row of the store.
function faultKey(f) {
  return f.id === null ? `unsaved:${f.kind}:${f.location}:${f.header_class}` : f.id;
}

function faultName(f) {
  if (f.id === null) return "unsaved";
  return f.saved === false ? `#${f.id} (unsaved)` : `#${f.id}`;
}

function byId(a, b) {
  return (a.id === null) - (b.id === null) || a.id - b.id;
}

async function refreshFaults() {
  const open = await api("faults", { state: "open" });
  const now = new Map(open.map((f) => [faultKey(f), f]));
  const gone = [...S.faults.keys()].filter((id) => !now.has(id) && typeof id === "number");
  const fresh = open.filter((f) => !S.faults.has(faultKey(f))).map(faultKey);
  S.faults = now;
  for (const id of gone) {
    try {
      const f = await api("fault", { id });
      S.resolved = [f, ...S.resolved.filter((r) => r.id !== id)].slice(0, RESOLVED_KEPT);
    } catch (e) { /* the store no longer has it */ }
  }
  drawFaults(new Set(fresh));
  if (S.selected !== null) {
    const f = S.faults.get(S.selected) || S.resolved.find((r) => r.id === S.selected);
    if (f) showFault(f, false);
  }
}

function drawFaults(fresh) {
  for (const b of document.querySelectorAll("#switches .badges > *")) b.remove();
  for (const g of document.querySelectorAll("g.switch.faulty")) g.classList.remove("faulty");
  const list = document.getElementById("fault-list");
  list.replaceChildren();
  const per = new Map();
  for (const f of [...S.faults.values()].sort(byId)) {
    const k = faultKey(f);
    const dpid = faultDpid(f);
    const n = per.get(dpid) || 0;
    per.set(dpid, n + 1);
    const g = dpid === null ? null : document.getElementById(`sw-${dpid}`);
    if (g) {
      g.classList.add("faulty");
      const badge = s("g", { class: `badge kind-${f.kind}`, "data-fault": k,
        transform: `translate(${-n * 14},0)` }, g.querySelector(".badges"));
      s("circle", { r: "7" }, badge);
      const t = s("text", { y: "3" }, badge);
      t.textContent = f.kind === "audit" ? "A" : f.kind === "blackhole" ? "B" : f.kind === "type_a" ? "a" : "p";
      s("title", {}, badge).textContent = `fault ${faultName(f)} ${f.kind}`;
      badge.addEventListener("click", (ev) => { ev.stopPropagation(); select(k); });
      if (fresh.has(k)) badge.classList.add("new");
    }
    const loc = finding(f);
    const li = h("li", { class: `kind-${f.kind}` + (fresh.has(k) ? " new" : "") + (S.selected === k ? " sel" : ""),
      "data-fault": k, "data-dpid": dpid === null ? "" : dpid, "data-kind": f.kind },
      h("span", { class: "dot" }), `${faultName(f)} ${f.kind} at `,
      h("b", {}, dpid === null ? f.location : S.names.get(dpid) || String(dpid)),
      loc ? ` (${loc.finding})` : "", ` since ${fmtTime(f.first_seen)}, ${f.count}×`);
    li.addEventListener("click", () => select(k));
    list.append(li);
  }
  if (!S.faults.size) list.append(h("li", { class: "none" }, "none"));
  const rl = document.getElementById("resolved-list");
  rl.replaceChildren();
  for (const f of S.resolved) {
    const li = h("li", { class: `kind-${f.kind} resolved`, "data-fault": f.id },
      h("span", { class: "dot" }), `#${f.id} ${f.kind} at ${S.names.get(faultDpid(f)) || f.location}, resolved ${fmtTime(f.resolved_at)}`);
    li.addEventListener("click", () => select(f.id));
    rl.append(li);
  }
  if (!S.resolved.length) rl.append(h("li", { class: "none" }, "none"));
}

async function select(id) {
  S.selected = id;
  showTab("faults");
  for (const li of document.querySelectorAll("#fault-list li, #resolved-list li")) {
    li.classList.toggle("sel", li.dataset.fault === String(id));
  }
  let f = S.faults.get(id) || S.resolved.find((r) => r.id === id);
  // A fault waiting for the store is only in the list; a stored one may have news.
  if (typeof id === "number" && !(f && f.saved === false)) {
    try { f = await api("fault", { id }); } catch (e) { /* keep what the list had */ }
  }
  if (f) showFault(f, true);
}

function row(name, value, field) {
  return h("tr", field ? { "data-field": field } : {}, h("th", {}, name), h("td", {}, value === null || value === undefined ? "-" : String(value)));
}

function pathText(path) {
  return path.map(([d, i, o]) => `${S.names.get(d) || d}(${i}→${o === null ? "-" : o})`).join(" ");
}

// What `pazzctl faults show` prints, and the paths and the entry drawn on the map.
function showFault(f, redraw) {
  const box = document.getElementById("fault-detail");
  const t = h("table", { class: "kv", "data-fault": f.id });
  for (const k of ["id", "kind", "state", "location", "header", "count", "reopened"]) t.append(row(k, f[k], k));
  if (f.saved === false) t.append(row("saved", "no: waiting in memory for the fault store", "saved"));
  t.append(row("egress", f.egress ? portText(f.egress.join(":")) : null, "egress"));
  t.append(row("first seen", fmtTime(f.first_seen)), row("last seen", fmtTime(f.last_seen)));
  if (f.resolved_at) t.append(row("resolved", fmtTime(f.resolved_at), "resolved"));
  if (f.actual) t.append(row("actual", `Verify_Port ${hex(f.actual.verify_port, 8)}, Verify_Rule ${hex(f.actual.verify_rule, 4)}`, "actual"));
  for (const e of f.expected || []) {
    t.append(row("expected", `from ${portText(e.ingress.join(":"))}: Verify_Port ${hex(e.verify_port, 8)}, Verify_Rule ${hex(e.verify_rule, 4)}; path ${pathText(e.path)}`, "expected"));
  }
  t.append(row("candidates", ((f.localization || {}).candidates || []).map((d) => S.names.get(d) || d).join(", "), "candidates"));
  const loc = finding(f);
  if (loc) {
    t.append(row("localized", `${loc.switch} ${loc.finding}`, "localized"));
    if (loc.cause) t.append(row("cause", loc.cause, "cause"));
    t.append(row("entry on the switch", loc.entry || "(none: table-miss)", "entry"));
    t.append(row("intended entry", loc.intended || "(none)", "intended"));
  } else if (f.polled) {
    t.append(row("localized", "no flow table differs (or the polls failed)", "localized"));
  } else {
    t.append(row("localized", "not yet", "localized"));
  }
  if (f.audit && f.kind !== "audit") t.append(row("audit", `${f.audit.finding} entry on ${f.audit.switch}`, "audit"));
  box.replaceChildren(h("h2", {}, `Fault ${faultName(f)}`), t);
  const sig = JSON.stringify([f.id, f.state, f.polled, f.audit, f.actual, f.expected]);
  if (!redraw && sig === S.drawn) return; // a poll without news: keep the drawing
  S.drawn = sig;
  clearOverlay(["expected", "actual"]);
  for (const c of document.querySelectorAll("#callouts > *")) c.remove();
  fitView();
  const crossed = f.actual && f.actual.verify_port ? portsInFilter(f.actual.verify_port) : [];
  for (const e of expectedFrom(f.expected || [], crossed)) {
    drawHops(e.path.map(([d, i, o]) => ({ dpid: d, in_port: i, out_port: o })), "ov-expected", -3);
  }
  if (crossed.length) {
    for (const k of crossed) {
      segment(k, "ov-actual", 3, false);
      const g = document.getElementById(`sw-${k.split(":")[0]}`);
      if (g) g.classList.add("on-actual");
    }
    if (f.egress) segment(f.egress.join(":"), "ov-actual", 3, true);
  }
  callout(f, faultDpid(f), loc);
}

// The expected alternatives from the ingress the packet entered by, when its edge port's
// bits are in Verify_Port; else every alternative.
function expectedFrom(expected, crossed) {
  const seen = new Set(crossed);
  const mine = expected.filter((e) => seen.has(e.ingress.join(":")));
  return mine.length ? mine : expected;
}

// Two entries shortened to what follows their common head (cut at a comma) when longer
// than n characters.
function tails(a, b, n) {
  if (a.length <= n && b.length <= n) return [a, b];
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  const cut = Math.max(a.lastIndexOf(",", i), 0);
  return cut > 8 ? ["…" + a.slice(cut), "…" + b.slice(cut)] : [a, b];
}

// The drawing's own box, grown to hold what is drawn beyond it (callouts).
function fitView(extra) {
  const svg = document.querySelector("#topology svg");
  if (!svg) return;
  if (!svg.dataset.box) svg.dataset.box = svg.getAttribute("viewBox");
  let [x0, y0, w, h] = svg.dataset.box.split(" ").map(Number);
  if (extra) {
    const x1 = Math.max(x0 + w, extra.x + extra.w + 6), y1 = Math.max(y0 + h, extra.y + extra.h + 6);
    x0 = Math.min(x0, extra.x - 6);
    y0 = Math.min(y0, extra.y - 6);
    w = x1 - x0;
    h = y1 - y0;
  }
  svg.setAttribute("viewBox", `${x0} ${y0} ${w} ${h}`);
  svg.style.maxWidth = `${Math.round(w * 1.5)}px`; // small networks: not blown up
}

// The offending entry beside the intended one, in a box pinned to the switch, drawn above
// the network so that it hides no switch.
function callout(f, dpid, loc) {
  const at = swPos(dpid);
  if (!at) return;
  const layer = document.getElementById("callouts");
  const g = s("g", { class: `callout kind-${f.kind}`, "data-fault": f.id, "data-dpid": dpid }, layer);
  const lines = [[`#${f.id} ${f.kind} at ${S.names.get(dpid) || dpid}` + (f.state === "open" ? "" : ` (${f.state})`), "title"]];
  if (loc) {
    // Where long entries agree (table, priority, match), only their differing tail is
    // shown; the whole entry is in the tooltip and the side panel.
    const [a, b] = tails(loc.entry || "(table-miss)", loc.intended || "(none)", 56);
    lines.push([`${loc.finding}: ${a}`, "entry", loc.entry]);
    lines.push([`intended: ${b}`, "intended", loc.intended]);
  } else {
    lines.push([f.polled ? "no flow table differs" : "localizing…", "pending"]);
  }
  const box = document.querySelector("#topology svg").dataset.box.split(" ").map(Number);
  const maxChars = 72;
  const w = Math.min(maxChars, Math.max(...lines.map(([x]) => x.length))) * 6.7 + 16;
  const ht = lines.length * 15 + 10;
  const x = Math.max(box[0] + 4, Math.min(at[0] - w / 2, box[0] + box[2] - w - 4));
  const y = box[1] - ht + 10;
  s("line", { x1: at[0], y1: at[1] - 15, x2: Math.max(x + 10, Math.min(at[0], x + w - 10)), y2: y + ht, class: "callout-pin" }, g);
  s("rect", { x, y, width: w, height: ht, rx: 5 }, g);
  lines.forEach(([text, cls, full], i) => {
    const t = s("text", { x: x + 8, y: y + 18 + i * 15, class: cls }, g);
    t.textContent = text.length > maxChars ? text.slice(0, maxChars - 1) + "…" : text;
    s("title", {}, t).textContent = full || text;
  });
  fitView({ x, y, w, h: ht });
}

// --- trace -------------------------------------------------------------------------------
async function runTrace(ev) {
  ev.preventDefault();
  const ingress = document.getElementById("trace-ingress").value;
  const header = document.getElementById("trace-header").value.trim();
  const box = document.getElementById("trace-result");
  clearOverlay(["trace"]);
  box.replaceChildren(h("p", {}, "tracing…"));
  let res;
  try {
    res = await api("trace", { ingress, header });
  } catch (e) {
    box.replaceChildren(h("p", { class: "error", id: "trace-error" }, e.message));
    return;
  }
  box.replaceChildren();
  box.dataset.header = res.header;
  res.outcomes.forEach((o, n) => {
    let title = `outcome ${n + 1}: ${o.kind}`;
    if (o.egress) title += ` at ${o.egress}`;
    if (o.reason) title += ` - ${o.reason}`;
    if (o.alternative) title += " [one of several SELECT choices]";
    const t = h("table", { class: "hops", "data-outcome": n + 1, "data-kind": o.kind, "data-egress": o.egress || "" },
      h("caption", {}, title),
      h("tr", {}, ...["switch", "in_port", "table", "priority", "cookie", "rule_id", "out_port"].map((c) => h("th", {}, c))));
    for (const hop of o.hops) {
      const rules = hop.rules.length ? hop.rules : [null];
      rules.forEach((r, i) => {
        const last = i === rules.length - 1;
        t.append(h("tr", i === 0 ? { "data-dpid": hop.dpid, "data-switch": hop.switch } : {},
          h("td", {}, i === 0 ? hop.switch : ""), h("td", {}, i === 0 ? String(hop.in_port) : ""),
          h("td", {}, r ? String(r.table) : "-"), h("td", {}, r ? String(r.priority) : "-"),
          h("td", {}, r ? "0x" + r.cookie.toString(16) : "-"), h("td", {}, r ? String(r.rule_id) : "-"),
          h("td", {}, last ? (hop.out_port === null ? "-" : String(hop.out_port)) : "")));
      });
    }
    box.append(t, h("p", { class: "tags" }, `expected Verify_Port ${o.verify_port}  Verify_Rule ${o.verify_rule}`));
    drawHops(o.hops, "ov-trace", 0);
  });
  if (!res.outcomes.length) box.append(h("p", {}, "no outcome (ingress port is down)"));
}

// --- coverage ----------------------------------------------------------------------------
const BANDS = ["band0", "band1", "band2", "band3", "never"];

function bandNames(bounds) {
  return [`≤ ${fmtSeconds(bounds[0])}`, `≤ ${fmtSeconds(bounds[1])} (window)`, `≤ ${fmtSeconds(bounds[2])}`, "older", "never"];
}

async function refreshCoverage() {
  S.coverage = await api("coverage");
  drawCoverage();
}

function drawCoverage() {
  const c = S.coverage;
  const note = document.getElementById("coverage-note");
  const table = document.getElementById("coverage");
  table.replaceChildren();
  for (const g of document.querySelectorAll("g.host")) g.classList.remove("cov-hi", "cov-mid", "cov-lo");
  if (!c || !c.enabled) {
    note.textContent = "The fuzzer is off (fuzz.enabled): no coverage.";
    return;
  }
  const n = Math.max(1, Number(document.getElementById("cov-n").value) || 1);
  const names = bandNames(c.age_bounds_s);
  note.textContent = `An area counts as covered while probed within ${fmtSeconds(c.window_s)}. ` +
    `Expected wait: the slowest group's revisit period × ${n} (a hidden rule in 1/${n} of an area).`;
  table.append(h("tr", {}, ...["ingress", "probed lately", "last probe of each area", "oldest", `expected wait (1/${n})`, "p99"].map((x) => h("th", {}, x))));
  for (const r of c.ingresses) {
    const total = r.age_counts.reduce((a, b) => a + b, 0) || 1;
    const bar = h("div", { class: "bar" });
    r.age_counts.forEach((k, i) => {
      if (!k) return;
      const seg = h("span", { class: BANDS[i], title: `${names[i]}: ${k} areas` });
      seg.style.width = `${(100 * k) / total}%`;
      bar.append(seg);
    });
    const base = r.expected_detect_s["1"];
    const p99 = r.p99_detect_s["1"];
    const tr = h("tr", { "data-ingress": r.ingress },
      h("td", {}, `${r.ingress}` + (r.host ? ` (${r.host})` : "")),
      h("td", {}, `${r.areas_recent}/${r.areas}`), h("td", {}, bar),
      h("td", {}, fmtSeconds(r.oldest_s)),
      h("td", { class: "wait" }, base === undefined ? "-" : fmtSeconds(base * n)),
      h("td", {}, p99 === undefined ? "-" : fmtSeconds(p99 * n)));
    tr.addEventListener("click", () => showAreas(r.ingress));
    table.append(tr);
    const share = r.areas ? r.areas_recent / r.areas : 0;
    const host = document.querySelector(`g.host[data-port="${keyOf(r.ingress)}"]`);
    if (host) host.classList.add(share >= 0.9 ? "cov-hi" : share >= 0.5 ? "cov-mid" : "cov-lo");
  }
  if (S.areaIngress) showAreas(S.areaIngress);
}

function keyOf(portName) {
  const i = portName.lastIndexOf(":");
  return `${S.byName.get(portName.slice(0, i))}:${portName.slice(i + 1)}`;
}

async function showAreas(ingress) {
  S.areaIngress = ingress;
  const box = document.getElementById("area-strip");
  let res;
  try { res = await api("coverage", { ingress }); } catch (e) { box.textContent = e.message; return; }
  const r = res.ingresses[0];
  if (!r) return;
  const b = res.age_bounds_s;
  const cells = h("div", { class: "cells" });
  for (const a of r.area_list) {
    let band = 4;
    if (a.age_s !== null) band = a.age_s <= b[0] ? 0 : a.age_s <= b[1] ? 1 : a.age_s <= b[2] ? 2 : 3;
    cells.append(h("span", { class: BANDS[band], title: `${a.group}: ${a.name}, ${a.probes} probes, last ${a.age_s === null ? "never" : fmtSeconds(a.age_s) + " ago"}` }));
  }
  const legend = h("p", { class: "bands" }, ...bandNames(b).map((x, i) => h("span", { class: `key ${BANDS[i]}` }, x)));
  box.replaceChildren(h("h3", {}, `Areas of ${ingress}, longest unprobed first` + (r.area_list_truncated ? " (first ones)" : "")), legend, cells);
}

// --- status and the loop ---------------------------------------------------------------
async function refreshStatus() {
  const st = await api("status");
  const m = st.model;
  const open = Object.entries(st.faults_open).filter(([, v]) => v).map(([k, v]) => `${k} ${v}`).join(", ") || "none";
  const el = document.getElementById("status");
  el.className = "";
  el.textContent = `${m.switches} switches, ${m.rules} rules, model v${m.version}; ` +
    `controller: ${st.controller}; faults open: ${open}; reports judged ${st.tester.reports || 0}`;
  document.getElementById("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
}

function showTab(name) {
  document.body.dataset.tab = name;
  for (const b of document.querySelectorAll("nav button")) b.classList.toggle("on", b.dataset.tab === name);
  for (const t of document.querySelectorAll(".tab")) t.classList.toggle("on", t.id === `tab-${name}`);
}

function every(ms, fn) {
  const run = async () => {
    try {
      await fn();
    } catch (e) {
      const el = document.getElementById("status");
      el.className = "error";
      el.textContent = `pazzd unreachable or failing: ${e.message}`;
    }
    setTimeout(run, ms);
  };
  run();
}

async function main() {
  for (const b of document.querySelectorAll("nav button")) b.addEventListener("click", () => showTab(b.dataset.tab));
  document.getElementById("trace-form").addEventListener("submit", runTrace);
  document.getElementById("cov-n").addEventListener("input", drawCoverage);
  try {
    await loadTopology();
  } catch (e) {
    document.getElementById("status").textContent = `cannot load the topology: ${e.message}`;
    return;
  }
  try {
    const all = await api("faults");
    S.resolved = all.filter((f) => f.state !== "open").sort((a, b) => (b.resolved_at || 0) - (a.resolved_at || 0)).slice(0, RESOLVED_KEPT);
  } catch (e) { /* the loop reports it */ }
  every(FAULT_POLL_MS, refreshStatus);
  every(FAULT_POLL_MS, refreshFaults);
  every(COVERAGE_POLL_MS, refreshCoverage);
  showTab("faults");
  document.body.dataset.ready = "1";
}

document.addEventListener("DOMContentLoaded", main);
