// PAZZ live view: draws faults, paths and coverage over the server-drawn topology SVG.
// Data: the API's read-only JSON under /ui/api/ (the same answers as pazzctl --json),
// polled; nothing here changes pazzd.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const FAULT_POLL_MS = 2000;
const COVERAGE_POLL_MS = 5000;
const RESOLVED_KEPT = 20;
const EXPECTED_LISTED = 10; // expected alternatives listed in a fault's detail (all are drawn)

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
  base: null, // the whole drawing's box (SVG units)
  view: null, // the box shown now: zoom and pan change it
  dragged: false, // a pan just ended: the click that ends it picks nothing
  pin: null, // the switch the callout points at
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
  for (const k of ["expected", "actual", "possible", "trace"]) {
    const m = s("marker", { id: `arrow-${k}`, viewBox: "0 0 10 10", refX: "9", refY: "5",
      markerWidth: "6", markerHeight: "6", orient: "auto-start-reverse" }, defs);
    s("path", { d: "M 0 0 L 10 5 L 0 10 z", class: `arrow-${k}` }, m);
  }
  S.topo = await api("topology");
  for (const sw of S.topo.switches) {
    S.byName.set(sw.name, sw.dpid);
    S.names.set(sw.dpid, sw.name);
  }
  for (const sw of S.topo.switches) {
    for (const p of sw.ports) {
      S.ports.set(`${sw.dpid}:${p.port}`, {
        dpid: sw.dpid, port: p.port, bits: parseInt(p.bits, 16) >>> 0,
        peer: p.peer ? keyOf(p.peer) : null, edge: p.edge,
      });
    }
  }
  const sel = document.getElementById("trace-ingress");
  for (const e of S.topo.edges) {
    sel.append(h("option", { value: e.port }, `${e.port} (${e.name})`));
  }
  for (const g of svg.querySelectorAll("g.host")) {
    g.addEventListener("click", () => {
      if (S.dragged) return;
      pickIngress(portText(g.dataset.port));
    });
  }
  hostLegend();
  setupZoom(svg);
}

function pickIngress(port) {
  document.getElementById("trace-ingress").value = port;
  showTab("trace");
}

// Every host with the switch port it hangs on; clicking one picks it for a trace and
// shows it on the map.
function hostLegend() {
  const list = document.getElementById("host-list");
  list.replaceChildren();
  const edges = [...S.topo.edges].sort((a, b) => a.name.localeCompare(b.name, undefined, { numeric: true }));
  for (const e of edges) {
    const li = h("li", { "data-port": e.port }, h("b", {}, e.name), ` ${e.port}`);
    li.addEventListener("click", () => {
      pickIngress(e.port);
      const g = document.querySelector(`g.host[data-port="${keyOf(e.port)}"]`);
      if (g) {
        zoomTo([[Number(g.dataset.x), Number(g.dataset.y)]]);
        g.classList.add("spot");
        setTimeout(() => g.classList.remove("spot"), 2000);
      }
    });
    list.append(li);
  }
  document.getElementById("host-count").textContent = String(edges.length);
}

// --- zoom and pan: the drawing's viewBox; the map keeps its size -----------------------
function svgEl() {
  return document.querySelector("#topology svg");
}

function setupZoom(svg) {
  const [x, y, w, hh] = svg.getAttribute("viewBox").split(" ").map(Number);
  S.base = { x, y, w, h: hh };
  S.view = { ...S.base };
  svg.removeAttribute("width");
  svg.removeAttribute("height");
  svg.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const [px, py] = toSvg(ev.clientX, ev.clientY);
    zoomBy(ev.deltaY < 0 ? 1 / 1.25 : 1.25, px, py);
  }, { passive: false });
  let drag = null;
  svg.addEventListener("pointerdown", (ev) => {
    if (ev.button !== 0) return;
    drag = { x: ev.clientX, y: ev.clientY, view: { ...S.view }, moved: false };
    S.dragged = false;
  });
  window.addEventListener("pointermove", (ev) => {
    if (!drag) return;
    const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (!drag.moved && Math.hypot(dx, dy) < 4) return;
    drag.moved = true;
    S.dragged = true;
    const k = unitsPerPixel();
    setView({ ...drag.view, x: drag.view.x - dx * k, y: drag.view.y - dy * k });
  });
  window.addEventListener("pointerup", () => {
    drag = null;
    setTimeout(() => { S.dragged = false; }, 0);
  });
  document.getElementById("zoom-in").addEventListener("click", () => zoomBy(1 / 1.5));
  document.getElementById("zoom-out").addEventListener("click", () => zoomBy(1.5));
  document.getElementById("zoom-fit").addEventListener("click", () => setView({ ...S.base }));
  window.addEventListener("resize", () => setView(S.view));
  setView(S.view);
}

// SVG units per screen pixel (the drawing is scaled to meet the box, aspect kept).
function unitsPerPixel() {
  const r = svgEl().getBoundingClientRect();
  return Math.max(S.view.w / (r.width || 1), S.view.h / (r.height || 1));
}

function toSvg(cx, cy) {
  const svg = svgEl();
  const pt = svg.createSVGPoint();
  pt.x = cx;
  pt.y = cy;
  const p = pt.matrixTransform(svg.getScreenCTM().inverse());
  return [p.x, p.y];
}

function toScreen(x, y) {
  const svg = svgEl();
  const pt = svg.createSVGPoint();
  pt.x = x;
  pt.y = y;
  const p = pt.matrixTransform(svg.getScreenCTM());
  return [p.x, p.y];
}

function zoomBy(f, px, py) {
  const v = S.view;
  if (px === undefined) [px, py] = [v.x + v.w / 2, v.y + v.h / 2];
  const w = Math.min(Math.max(v.w * f, 160), S.base.w * 4);
  const k = w / v.w;
  setView({ x: px - (px - v.x) * k, y: py - (py - v.y) * k, w, h: v.h * k });
}

// Show these points (SVG units) with room around them; never closer than a box of 480
// units (a few switches), never wider than the whole drawing.
function zoomTo(points) {
  if (!points.length) return;
  const xs = points.map((p) => p[0]), ys = points.map((p) => p[1]);
  const pad = 90;
  let x0 = Math.min(...xs) - pad, x1 = Math.max(...xs) + pad;
  let y0 = Math.min(...ys) - pad, y1 = Math.max(...ys) + pad;
  const r = svgEl().getBoundingClientRect();
  const aspect = (r.width || 4) / (r.height || 3);
  let w = Math.max(x1 - x0, 480), hh = Math.max(y1 - y0, 480 / aspect);
  if (w / hh < aspect) w = hh * aspect; else hh = w / aspect;
  if (w >= S.base.w && hh >= S.base.h) {
    setView({ ...S.base });
    return;
  }
  setView({ x: (x0 + x1) / 2 - w / 2, y: (y0 + y1) / 2 - hh / 2, w, h: hh });
}

function setView(v) {
  S.view = v;
  const svg = svgEl();
  if (!svg) return;
  svg.setAttribute("viewBox", `${v.x} ${v.y} ${v.w} ${v.h}`);
  const z = S.base.w / v.w;
  document.getElementById("zoom-level").textContent = `${Math.round(z * 100)} %`;
  placeCallout();
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
// cls: "ov-KIND [more classes]"; the arrow head is KIND's.
function segment(key, cls, off, out) {
  const p = S.ports.get(key);
  if (!p) return null;
  const here = swPos(p.dpid);
  let there = null;
  if (p.edge !== null && p.edge !== undefined) there = hostPos(key);
  else if (p.peer) there = swPos(Number(p.peer.split(":")[0]));
  if (!here || !there) return null;
  const [a, b] = out ? [here, there] : [there, here];
  const dx = b[0] - a[0], dy = b[1] - a[1];
  const len = Math.hypot(dx, dy) || 1;
  const nx = (-dy / len) * off, ny = (dx / len) * off;
  const shrink = 0.2;
  const kind = cls.split(" ")[0].replace("ov-", "");
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
  const kind = cls.split(" ")[0].replace("ov-", "");
  for (const hop of hops) {
    const g = document.getElementById(`sw-${hop.dpid}`);
    if (g) g.classList.add(`on-${kind}`);
  }
}

function clearOverlay(kinds) {
  for (const k of kinds) {
    for (const e of document.querySelectorAll(`#overlay .ov-${k}`)) e.remove();
    for (const e of document.querySelectorAll(`.on-${k}`)) e.classList.remove(`on-${k}`);
  }
}

// The ports whose three Bloom bits are all set in Verify_Port (tester.detect's reading of
// the filter): only for a pazzd whose fault answer has no rebuilt path.
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
  let m = loc.match(/^dpid:(\d+)/) || loc.match(/^(?:egress|hop):(\d+):/);
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
    let f = null;
    try { f = await api("fault", { id: S.selected }); } catch (e) { /* gone from the store */ }
    if (f && f.id === S.selected) showFault(f, false);
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
    const li = h("li", { class: `kind-${f.kind} resolved` + (S.selected === f.id ? " sel" : ""), "data-fault": f.id },
      h("span", { class: "dot" }), `#${f.id} ${f.kind} at ${S.names.get(faultDpid(f)) || f.location}, resolved ${fmtTime(f.resolved_at)}`);
    li.addEventListener("click", () => select(f.id));
    rl.append(li);
  }
  if (!S.resolved.length) rl.append(h("li", { class: "none" }, "none"));
}

async function select(id, fromLink) {
  S.selected = id;
  showTab("faults");
  if (!fromLink) setHash(`fault=${id}`);
  for (const li of document.querySelectorAll("#fault-list li, #resolved-list li")) {
    li.classList.toggle("sel", li.dataset.fault === String(id));
  }
  let f = S.faults.get(id) || S.resolved.find((r) => r.id === id);
  // A fault waiting for the store is only in the list; a stored one may have news.
  if (typeof id === "number" && !(f && f.saved === false)) {
    try {
      f = await api("fault", { id });
    } catch (e) {
      if (!f) {
        document.getElementById("fault-detail").replaceChildren(h("p", { class: "error", id: "fault-error" }, e.message));
        return;
      }
    }
  }
  if (f && S.selected === id) showFault(f, true);
}

function row(name, value, field) {
  return h("tr", field ? { "data-field": field } : {}, h("th", {}, name), h("td", {}, value === null || value === undefined ? "-" : String(value)));
}

function pathText(path) {
  return path.map(([d, i, o]) => `${S.names.get(d) || d}(${i}→${o === null ? "-" : o})`).join(" ");
}

// What the rebuilt actual path says, in words.
function actualText(p) {
  if (!p) return null;
  if (p.status === "unique") return `${p.chains[0].text} (the only path that gives Verify_Port ${p.verify_port})`;
  if (p.status === "none") return `no path of the topology gives Verify_Port ${p.verify_port}`;
  const n = p.more ? `more than ${p.chain_count}` : String(p.chain_count);
  return `ambiguous: ${n} paths give Verify_Port ${p.verify_port}: ` + p.chains.map((c) => c.text).join(" | ");
}

// The ingress a fault's header most likely came in by: the rebuilt path's, else the first
// expected alternative's.
function faultIngress(f) {
  const p = f.path;
  if (p && p.chains.length) return portText(p.chains[0].ingress.join(":"));
  const e = (f.expected || [])[0];
  return e ? portText(e.ingress.join(":")) : null;
}

function traceButton(f) {
  const ing = faultIngress(f);
  if (!ing || !f.header) return null;
  const b = h("button", { type: "button", class: "trace-this", "data-fault": f.id,
    title: `trace ${f.header} from ${ing} through the model` }, "trace this header");
  b.addEventListener("click", () => startTrace(ing, f.header));
  return b;
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
  if (f.path) t.append(row("actual path", actualText(f.path), "path"));
  const exp = expectedShown(f);
  if (exp.length > EXPECTED_LISTED) t.append(row("expected", `${exp.length} alternatives from the packet's ingress; the first ${EXPECTED_LISTED}:`, "expected-count"));
  for (const e of exp.slice(0, EXPECTED_LISTED)) {
    t.append(row("expected", `from ${portText(e.ingress.join(":"))}: Verify_Port ${hex(e.verify_port, 8)}, Verify_Rule ${hex(e.verify_rule, 4)}; path ${pathText(e.path)}`, "expected"));
  }
  t.append(row("candidates", ((f.localization || {}).candidates || []).map((d) => S.names.get(d) || d).join(", "), "candidates"));
  const loc = finding(f);
  if (loc) {
    t.append(row("localized", `${loc.switch} ${loc.finding}`, "localized"));
    if (f.difference) t.append(row("differs", f.difference.text, "difference"));
    if (loc.cause) t.append(row("cause", loc.cause, "cause"));
    t.append(row("entry on the switch", loc.entry || "(none: table-miss)", "entry"));
    t.append(row("intended entry", loc.intended || "(none)", "intended"));
  } else if (f.polled) {
    t.append(row("localized", "no flow table differs (or the polls failed)", "localized"));
  } else {
    t.append(row("localized", "not yet", "localized"));
  }
  if (f.audit && f.kind !== "audit") t.append(row("audit", `${f.audit.finding} entry on ${f.audit.switch}`, "audit"));
  const link = typeof f.id === "number"
    ? h("a", { href: `#fault=${f.id}`, class: "permalink", title: "a link to this fault" }, "link")
    : "";
  box.replaceChildren(h("h2", {}, `Fault ${faultName(f)} `, link), t, h("p", {}, traceButton(f)));
  const sig = JSON.stringify([f.id, f.state, f.polled, f.audit, f.actual, f.expected, f.path]);
  if (!redraw && sig === S.drawn) return; // a poll without news: keep the drawing
  S.drawn = sig;
  drawFault(f, redraw);
}

// The expected alternatives from the ingress(es) the rebuilt path starts at; without a
// rebuilt path, those whose ingress bits are in Verify_Port; else all of them.
function expectedShown(f) {
  const all = f.expected || [];
  let from;
  if (f.path && f.path.chains.length) from = new Set(f.path.chains.map((c) => c.ingress.join(":")));
  else if (f.actual && f.actual.verify_port) from = new Set(portsInFilter(f.actual.verify_port));
  else return all;
  const mine = all.filter((e) => from.has(e.ingress.join(":")));
  return mine.length ? mine : all;
}

function drawFault(f, rezoom) {
  clearOverlay(["expected", "actual", "possible"]);
  const overlay = document.getElementById("overlay");
  overlay.classList.toggle("resolved", f.state !== "open");
  const shown = [];
  for (const e of expectedShown(f)) {
    drawHops(e.path.map(([d, i, o]) => ({ dpid: d, in_port: i, out_port: o })), "ov-expected", -3);
    for (const [d] of e.path) shown.push(swPos(d));
  }
  const p = f.path;
  if (p) {
    const solid = new Set(p.solid.map((x) => x.join(":")));
    for (const k of solid) {
      segment(k, "ov-actual solid", 3, false);
      const g = document.getElementById(`sw-${k.split(":")[0]}`);
      if (g) g.classList.add("on-actual");
      shown.push(swPos(Number(k.split(":")[0])));
    }
    for (const x of p.candidate) segment(x.join(":"), "ov-actual maybe", 3, false);
    for (const x of p.possible) segment(x.join(":"), "ov-possible", 3, false);
    if (f.egress && p.sampled_at === "egress" && p.chains.length) {
      segment(f.egress.join(":"), p.status === "unique" ? "ov-actual solid" : "ov-actual maybe", 3, true);
    }
  } else if (f.actual && f.actual.verify_port) {
    for (const k of portsInFilter(f.actual.verify_port)) segment(k, "ov-possible", 3, false);
  }
  const dpid = faultDpid(f);
  if (dpid !== null) shown.push(swPos(dpid));
  callout(f, dpid);
  if (rezoom) zoomTo(shown.filter((x) => x));
}

// The difference between the entry on the switch and the intended one, in a box over the
// map (it keeps its size at every zoom) with a pin to the switch.
function callout(f, dpid) {
  const old = document.getElementById("callout");
  if (old) old.remove();
  for (const c of document.querySelectorAll("#callouts > *")) c.remove();
  if (dpid === null || !swPos(dpid)) return;
  const loc = finding(f);
  const box = h("div", { id: "callout", class: `callout kind-${f.kind}` + (f.state === "open" ? "" : " resolved"),
    "data-fault": f.id, "data-dpid": dpid });
  box.append(h("div", { class: "title" }, `#${f.id} ${f.kind} at ${S.names.get(dpid) || dpid}` + (f.state === "open" ? "" : ` (${f.state})`)));
  if (loc && f.difference) {
    box.append(h("div", { class: "diff", title: `${loc.entry || "(none)"}\nintended: ${loc.intended || "(none)"}` },
      `${loc.finding}: ${f.difference.text}`));
  } else if (loc) {
    box.append(h("div", { class: "diff" }, `${loc.finding}: ${loc.entry || "(table-miss)"}`),
      h("div", { class: "intended" }, `intended: ${loc.intended || "(none)"}`));
  } else {
    box.append(h("div", { class: "pending" }, f.polled ? "no flow table differs" : "localizing…"));
  }
  if (f.path && f.path.status !== "unique") {
    box.append(h("div", { class: "note" }, f.path.status === "none" ? "no path fits Verify_Port" :
      `actual path ambiguous: ${f.path.more ? "more than " : ""}${f.path.chain_count} paths fit Verify_Port`));
  }
  const tb = traceButton(f);
  if (tb) box.append(tb);
  document.getElementById("map-view").append(box);
  S.pin = dpid;
  placeCallout();
}

// The callout in the map's corner the faulty switch is farthest from; its pin drawn in
// the SVG from the switch to the box's nearest corner.
function placeCallout() {
  const box = document.getElementById("callout");
  const layer = document.getElementById("callouts");
  if (!box || !layer || S.pin === null || S.pin === undefined) return;
  const at = swPos(S.pin);
  if (!at) return;
  const map = document.getElementById("map-view").getBoundingClientRect();
  const [sx, sy] = toScreen(at[0], at[1]);
  // The corner whose box covers the fewest switches and path arrows drawn; of equals, the
  // one farthest from the switch.
  const marks = [...document.querySelectorAll("#overlay line.ov, g.switch.faulty, g.switch[class*=on-], g.host")]
    .map((e) => e.getBoundingClientRect()).map((b) => [b.left + b.width / 2, b.top + b.height / 2]);
  const bw = box.offsetWidth, bh = box.offsetHeight;
  let best = null;
  for (const [left, top] of [[true, true], [false, true], [true, false], [false, false]]) {
    const x0 = left ? map.left + 8 : map.right - 8 - bw, y0 = top ? map.top + 8 : map.bottom - 40 - bh;
    const covered = marks.filter(([x, y]) => x >= x0 && x <= x0 + bw && y >= y0 && y <= y0 + bh).length
      + (sx >= x0 && sx <= x0 + bw && sy >= y0 && sy <= y0 + bh ? 100 : 0);
    const far = Math.hypot(x0 + bw / 2 - sx, y0 + bh / 2 - sy);
    if (!best || covered < best.covered || (covered === best.covered && far > best.far)) best = { left, top, covered, far };
  }
  const { left, top } = best;
  box.style.left = left ? "8px" : "";
  box.style.right = left ? "" : "8px";
  box.style.top = top ? "8px" : "";
  box.style.bottom = top ? "" : "40px";
  const r = box.getBoundingClientRect();
  const cx = left ? r.right : r.left, cy = top ? r.bottom : r.top;
  const [px, py] = toSvg(cx, cy);
  layer.replaceChildren();
  s("line", { class: "callout-pin", x1: at[0], y1: at[1], x2: px, y2: py }, layer);
  s("circle", { class: "callout-ring", cx: at[0], cy: at[1], r: 26 }, layer);
}

// --- deep links: #fault=N, #trace=INGRESS,HEADER -----------------------------------------
function setHash(h2) {
  history.replaceState(null, "", `#${h2}`);
}

function applyHash() {
  const raw = decodeURIComponent(location.hash.slice(1));
  let m = raw.match(/^fault=(\d+)$/);
  if (m) {
    select(Number(m[1]), true);
    return;
  }
  m = raw.match(/^trace=([^,]+),(.*)$/);
  if (m) startTrace(m[1], m[2], true);
}

// --- trace -------------------------------------------------------------------------------
function startTrace(ingress, header, fromLink) {
  const sel = document.getElementById("trace-ingress");
  if (![...sel.options].some((o) => o.value === ingress)) sel.append(h("option", { value: ingress }, ingress));
  sel.value = ingress;
  document.getElementById("trace-header").value = header;
  showTab("trace");
  runTrace(null, fromLink);
}

async function runTrace(ev, fromLink) {
  if (ev) ev.preventDefault();
  const ingress = document.getElementById("trace-ingress").value;
  const header = document.getElementById("trace-header").value.trim();
  const box = document.getElementById("trace-result");
  if (!fromLink) setHash(`trace=${ingress},${header}`);
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
  const shown = [];
  res.outcomes.forEach((o, n) => {
    let title = `outcome ${n + 1}: ${o.kind}`;
    if (o.egress) title += ` at ${o.egress}`;
    if (o.reason) title += ` - ${o.reason}`;
    if (o.alternative) title += " [one of several SELECT choices]";
    const cols = ["switch", "in_port", "table", "priority", "rule_id", "out_port"];
    const t = h("table", { class: "hops", "data-outcome": n + 1, "data-kind": o.kind, "data-egress": o.egress || "" },
      h("caption", {}, title), h("tr", {}, ...cols.map((c) => h("th", {}, c))));
    for (const hop of o.hops) {
      const rules = hop.rules.length ? hop.rules : [null];
      rules.forEach((r, i) => {
        const last = i === rules.length - 1;
        const attrs = i === 0 ? { "data-dpid": hop.dpid, "data-switch": hop.switch, class: "hop" } : { class: "hop" };
        if (r) attrs.title = `cookie 0x${r.cookie.toString(16)}`;
        const cell = (col, v) => h("td", { "data-col": col }, v);
        t.append(h("tr", attrs,
          cell("switch", i === 0 ? hop.switch : ""), cell("in_port", i === 0 ? String(hop.in_port) : ""),
          cell("table", r ? String(r.table) : "-"), cell("priority", r ? String(r.priority) : "-"),
          cell("rule_id", r ? String(r.rule_id) : "-"),
          cell("out_port", last ? (hop.out_port === null ? "-" : String(hop.out_port)) : "")));
        // The matched entry, as ovs-appctl ofproto/trace shows it: its match, its actions.
        if (r && r.match !== undefined) {
          t.append(h("tr", { class: "entry" }, h("td", { colspan: String(cols.length) },
            h("span", { "data-col": "match" }, r.match === null ? "(entry not in the model)" : r.match),
            h("span", { class: "arrow" }, " actions="),
            h("span", { "data-col": "actions" }, r.actions === null ? "?" : r.actions))));
        }
      });
      shown.push(swPos(hop.dpid));
    }
    box.append(t, h("p", { class: "tags" }, `expected Verify_Port ${o.verify_port}  Verify_Rule ${o.verify_rule}`));
    drawHops(o.hops, "ov-trace", 0);
  });
  if (!res.outcomes.length) box.append(h("p", {}, "no outcome (ingress port is down)"));
  zoomTo(shown.filter((x) => x));
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
  document.getElementById("trace-form").addEventListener("submit", (ev) => runTrace(ev));
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
  window.addEventListener("hashchange", applyHash);
  applyHash();
  document.body.dataset.ready = "1";
}

document.addEventListener("DOMContentLoaded", main);
