// Holmes ward dashboard. Plain DOM, no dependencies, no inline script (the page's CSP forbids
// it). Everything that comes from data is set as text, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { snapshot: null, me: null, route: "ward", bed: null, source: null, health: null, skewMs: 0,
  alarmStrips: new Map() };

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
}

function fmtTime(ms) {
  return ms ? new Date(ms).toLocaleTimeString() : "";
}

function fmtAge(secs) {
  if (secs === null || secs === undefined) return "no data yet";
  if (secs < 2) return "data now";
  if (secs < 120) return `data ${Math.round(secs)} s ago`;
  return `data ${Math.round(secs / 60)} min ago`;
}

// The server's clock now, from the latest snapshot (alarm ages are counted on it, so a page
// whose computer's clock is off still shows them right).
function serverNow() {
  return Date.now() + state.skewMs;
}

function alarmAge(raisedMs) {
  return Math.max(0, Math.round((serverNow() - raisedMs) / 1000));
}

// "onset 12:00:05 · 7 s": the risk alarm's onset (the bed's clock) and its age, ticking; an
// alarm the beat counter raised also says where its VT run began ("onset 12:00:05 · VT run
// from 12:00:02 · 7 s").
function onsetText(onsetMs, raisedMs, runMs) {
  const run = runMs == null ? "" : ` · VT run from ${fmtTime(runMs)}`;
  return `onset ${fmtTime(onsetMs)}${run} · ${alarmAge(raisedMs)} s`;
}

// The data attributes an onset element carries so that its age ticks.
function onsetData(onsetMs, raisedMs, runMs) {
  const d = { class: "alarm-onset", "data-onset-ms": String(onsetMs), "data-raised-ms": String(raisedMs) };
  if (runMs != null) d["data-run-onset-ms"] = String(runMs);
  d.text = onsetText(onsetMs, raisedMs, runMs);
  return d;
}

function tickAges() {
  for (const e of document.querySelectorAll("[data-raised-ms]")) {
    const run = e.dataset.runOnsetMs === undefined ? null : Number(e.dataset.runOnsetMs);
    e.textContent = onsetText(Number(e.dataset.onsetMs), Number(e.dataset.raisedMs), run);
  }
}

async function api(path, opts) {
  const r = await fetch(path, Object.assign({ credentials: "same-origin" }, opts || {}));
  let body = null;
  try { body = await r.json(); } catch (_) { body = null; }
  return { ok: r.ok, status: r.status, body };
}

async function post(path, data) {
  return api(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(data || {}) });
}

// ---- sign-in ----

async function refreshMe() {
  const r = await api("/api/me");
  state.me = r.body || { user: null };
  const user = state.me.user;
  $("login").hidden = !!user;
  $("who").hidden = !user;
  $("who-name").textContent = user ? `${user.name} (${user.role})` : "";
  connect();
}

$("login").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const r = await post("/api/login", { name: $("login-name").value, password: $("login-password").value });
  $("login-error").textContent = r.ok ? "" : (r.body && r.body.error) || "sign-in failed";
  $("login-password").value = "";
  await refreshMe();
});

$("logout").addEventListener("click", async () => {
  await post("/api/logout");
  await refreshMe();
});

// ---- the live feed (server-sent events; the browser reconnects by itself) ----

function connect() {
  if (state.source) state.source.close();
  const s = new EventSource("/api/stream");
  state.source = s;
  s.addEventListener("ward", (ev) => {
    state.snapshot = JSON.parse(ev.data);
    state.skewMs = state.snapshot.generated_ms - Date.now();
    $("conn").textContent = "live";
    $("conn").className = "conn live";
    $("ward-locked").hidden = true;
    render();
  });
  s.onerror = () => {
    $("conn").textContent = "reconnecting…";
    $("conn").className = "conn down";
    if (s.readyState === EventSource.CLOSED) {
      // A refused feed (not signed in) closes for good; try again in a while.
      $("ward-locked").hidden = !!(state.me && (state.me.user || state.me.public_ward_view));
      setTimeout(() => { if (state.source === s) connect(); }, 3000);
    }
  };
}

// ---- rendering ----

function sparkline(trend, threshold) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("viewBox", "0 0 100 30");
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("aria-label", "risk trend");
  const y = (v) => (30 - v * 28 - 1).toFixed(2);
  const line = document.createElementNS(ns, "line");
  line.setAttribute("x1", "0"); line.setAttribute("x2", "100");
  line.setAttribute("y1", y(threshold)); line.setAttribute("y2", y(threshold));
  svg.append(line);
  if (trend.length > 1) {
    const t0 = trend[0][0], t1 = trend[trend.length - 1][0];
    const span = Math.max(1, t1 - t0);
    const pts = trend.map(([t, v]) => `${(((t - t0) / span) * 100).toFixed(2)},${y(v)}`).join(" ");
    const pl = document.createElementNS(ns, "polyline");
    pl.setAttribute("points", pts);
    svg.append(pl);
  }
  return svg;
}

function tile(b, threshold) {
  const l = b.latest;
  const band = l ? l.band : "none";
  const t = el("a", { class: `tile band-${band} state-${b.status}`, href: `#/bed/${encodeURIComponent(b.bed)}`, "data-bed": b.bed });
  t.append(el("div", { class: "top" },
    el("span", { class: "label", text: b.label }),
    el("span", { class: `state ${b.status}`, text: b.status })));
  const risk = el("div", { class: "risk" });
  if (l && l.score !== null && l.score !== undefined) {
    risk.append(document.createTextNode(`${Math.round(l.score * 100)}%`));
    risk.append(el("small", { text: band === "high" ? "HIGH RISK" : band === "elevated" ? "elevated" : "low" }));
  } else {
    risk.append(document.createTextNode("—"));
    risk.append(el("small", { text: l ? l.status.replace("_", " ") : "no score yet" }));
  }
  t.append(risk);
  t.append(sparkline(b.trend || [], threshold));
  t.append(el("div", { class: "meta", text: `${fmtAge(b.data_age_secs)}${l ? " · window " + fmtTime(l.window_end_ms) : ""}` }));
  const flags = el("div", { class: "flags" });
  if (l) {
    (l.leads || []).forEach((q, i) => {
      const role = ROLES[i] || `lead ${i + 1}`;
      if (q && q[0] > 0) flags.append(el("span", { text: `${role} off ${q[0]}%` }));
      else if (q && q[1] < 80) flags.append(el("span", { text: `${role} ${q[1]}% signal` }));
    });
    const one = oneLeadFlag(l.leads || []);
    if (one) flags.append(one);
    if (l.partial) flags.append(el("span", { text: `partial: ${l.missing.length} missing` }));
    if (l.degraded) flags.append(el("span", { text: "degraded plan" }));
  }
  for (const a of b.alarms || []) flags.append(el("span", { text: `alarm: ${a.replace("_", " ")}` }));
  t.append(flags);
  if (b.risk_alarm_onset_ms !== null && b.risk_alarm_onset_ms !== undefined) {
    t.append(el("div", onsetData(b.risk_alarm_onset_ms, b.risk_alarm_raised_ms, b.risk_alarm_run_onset_ms)));
  }
  if ((b.monitor_alarms || []).length) {
    t.append(el("div", { class: "monitor-alarms" }, ...b.monitor_alarms.map(monitorAlarm)));
  }
  return t;
}

// ---- the monitor's own alarms and Holmes's opinion on them ----

const MONITOR_KINDS = { vt: "VT", vf: "VF", asystole: "asystole", brady: "extreme bradycardia",
  tachy: "extreme tachycardia", other: "arrhythmia" };

// What Holmes says of a monitor's alarm: "confirmed 87%", "doubted 12%", why a VT or VF alarm
// has no opinion, or, for the kinds it does not judge, that it was received as it is.
function verdict(a) {
  if (!a.judged) return { word: "received", text: "received, not judged" };
  if (a.confirmed === null || a.confirmed === undefined) {
    return { word: "unjudged", text: `not judged: ${a.not_judged || "no opinion"}` };
  }
  const word = a.confirmed ? "confirmed" : "doubted";
  return { word, text: `Holmes: ${word} ${Math.round((a.probability || 0) * 100)}%` };
}

// One monitor alarm as received (kind, onset on the monitor's clock, ended or not) with the
// opinion and its one-line reason.
function monitorAlarm(a) {
  const v = verdict(a);
  const row = el("div", { class: `monitor-alarm verdict-${v.word}`, "data-monitor-alarm": String(a.key), "data-kind": a.kind });
  const when = `${fmtTime(a.onset_ms)}${a.end_ms === null || a.end_ms === undefined ? ", active" : `, ended ${fmtTime(a.end_ms)}`}`;
  row.append(el("strong", { text: `Monitor ${MONITOR_KINDS[a.kind] || a.kind}` }), el("span", { class: "when", text: when }),
    el("span", { class: "verdict", text: v.text }));
  if (a.confirmed !== null && a.confirmed !== undefined && a.reason) row.append(el("span", { class: "reason", text: a.reason }));
  return row;
}

// The bed view's list of its monitor's alarms, each VT or VF alarm with the strip of the 16 s
// its opinion read (kept once fetched: a stored strip does not change).
async function showMonitorAlarms(enc, list) {
  const box = $("bed-monitor-alarms");
  const alarms = ((list.body && list.body.alarms) || []).slice(0, 20).map((a) => Object.assign({}, a, {
    judged: a.kind === "vt" || a.kind === "vf",
    not_judged: a.provenance && a.provenance.not_judged,
  }));
  const wanted = alarms.filter((a) => a.judged && a.confirmed !== null).slice(0, 3);
  // A few beds' strips at most are kept.
  if (state.alarmStrips.size > 30) state.alarmStrips.clear();
  for (const a of wanted) {
    if (!state.alarmStrips.has(a.key)) {
      const r = await api(`/api/monitor_alarms/${a.key}/strip`);
      if (r.ok) state.alarmStrips.set(a.key, r.body.strip);
    }
  }
  if (state.route !== "bed" || `${encodeURIComponent(state.bed)}` !== enc) return;
  box.replaceChildren();
  if (!alarms.length) box.append(el("p", { class: "empty", text: "none received" }));
  for (const a of alarms) {
    const item = monitorAlarm(a);
    const strip = wanted.includes(a) && state.alarmStrips.get(a.key);
    if (strip) {
      const strips = el("div", { class: "alarm-strips" });
      strip.leads.forEach((lead, i) => {
        const c = el("canvas", { class: "strip", "data-monitor-alarm-strip": String(a.key), "aria-label": `${strip.names[i]} before the monitor's alarm` });
        strips.append(el("div", { text: `${strip.names[i]}, the ${Math.round(lead.length / strip.fs)} s before the alarm (what Holmes read)` }), c);
        // Once in the page, so the canvas has its width.
        requestAnimationFrame(() => drawStrip(c, lead, strip.fs, markOf(lead, strip.fs, strip.end_ms, a.onset_ms)));
      });
      item.append(strips);
    }
    box.append(item);
  }
}

// The ECG lead slots by role: the monitor's lead names map to them (`[leads]` in the config).
const ROLES = ["primary lead", "secondary lead", "third lead"];

// What a bed's window was scored from, when not both leads: the one usable lead (the members
// of the other lead's role had nothing to score). The alarm rules are chosen with both leads;
// scored from the secondary lead alone, the served zoo raised several times the false alarms
// on validation (BENCHMARKS.md, "A monitor sending one lead"), so that is marked.
function oneLead(leads) {
  const [p, s] = [leads[0] && leads[0][2], leads[1] && leads[1][2]];
  if (p && !s) return { short: "primary lead only", warn: false,
    long: "scored from the primary lead alone" };
  if (s && !p) return { short: "secondary lead only: more false alarms", warn: true,
    long: "scored from the secondary lead alone: the alarm rule was chosen with both leads, and from this lead alone it raises more false alarms" };
  return null;
}

function oneLeadFlag(leads) {
  const one = oneLead(leads);
  return one && el("span", { class: `one-lead${one.warn ? " warn" : ""}`, text: one.short, title: one.long });
}

function renderAlarms() {
  const box = $("alarms");
  box.replaceChildren();
  const snap = state.snapshot;
  if (!snap) return;
  const signedIn = !!(state.me && state.me.user);
  for (const a of snap.alarms) {
    const silenced = a.silenced_until_ms && a.silenced_until_ms > Date.now();
    const row = el("div", { class: `alarm ${a.technical ? "technical" : "risk"}${a.acked_by ? " acked" : ""}`, "data-alarm": String(a.id), "data-kind": a.kind });
    const what = a.technical ? `Technical: ${a.kind.replace("_", " ")}` : `Risk ${Math.round((a.value || 0) * 100)}%`;
    row.append(el("strong", { text: a.bed }), el("span", { text: what }));
    if (a.onset_ms !== null && a.onset_ms !== undefined) {
      row.append(el("span", onsetData(a.onset_ms, a.raised_ms, a.run_onset_ms)));
    } else {
      row.append(el("span", { text: `since ${fmtTime(a.raised_ms)}` }));
    }
    if (a.acked_by) row.append(el("span", { class: "acked-by", text: `acknowledged by ${a.acked_by} at ${fmtTime(a.acked_ms)}` }));
    if (silenced) row.append(el("span", { text: `silenced by ${a.silenced_by} until ${fmtTime(a.silenced_until_ms)}` }));
    if (signedIn && !a.acked_by) {
      row.append(el("button", { type: "button", class: "ack", text: "Acknowledge", onclick: () => act(`/api/alarms/${a.id}/ack`, {}) }));
    }
    if (signedIn && !silenced) {
      row.append(el("button", { type: "button", class: "silence", text: "Silence 2 min", onclick: () => act(`/api/alarms/${a.id}/silence`, { secs: 120 }) }));
    }
    box.append(row);
  }
}

async function act(path, body) {
  const r = await post(path, body);
  if (!r.ok) alert((r.body && r.body.error) || "action failed");
}

function renderWard() {
  const snap = state.snapshot;
  const tiles = $("tiles");
  tiles.replaceChildren(...snap.beds.map((b) => tile(b, snap.risk_alarm_on)));
  $("ward-empty").hidden = snap.beds.length > 0;
}

function render() {
  $("clock").textContent = new Date().toLocaleTimeString();
  if (!state.snapshot) return;
  renderAlarms();
  if (state.route === "ward") renderWard();
}

// ---- bed view ----

// Where on a strip the risk alarm fired: "inside" (drawn as a red line with a flag), "before"
// (the strip starts after it; said at the left edge), or null (no risk alarm).
function markOf(samples, fs, endMs, onsetMs) {
  if (onsetMs === null || onsetMs === undefined || endMs === undefined) return null;
  const at = samples.length - ((endMs - onsetMs) * fs) / 1000;
  if (at < 0) return { where: "before", secs: Math.round(-at / fs) };
  return { where: "inside", at: Math.min(at, samples.length) };
}

function drawMark(canvas, g, samples, mark) {
  if (!mark) return;
  const w = canvas.width, h = canvas.height;
  g.strokeStyle = "#ff4d4d"; g.fillStyle = "#ff4d4d"; g.lineWidth = 2; g.font = "12px sans-serif";
  canvas.dataset.alarmMark = mark.where;
  if (mark.where === "inside") {
    const x = Math.min(w - 1, (mark.at / samples.length) * w);
    g.beginPath(); g.moveTo(x, 0); g.lineTo(x, h); g.stroke();
    g.fillRect(x, 2, 8, 8);
    g.fillText("alarm", Math.max(2, Math.min(x + 10, w - 40)), 11);
  } else {
    g.fillText(`alarm fired ${mark.secs} s before this strip`, 6, 14);
  }
}

function drawStrip(canvas, samples, fs, mark) {
  const w = (canvas.width = canvas.clientWidth || 800);
  const h = (canvas.height = 140);
  const g = canvas.getContext("2d");
  g.fillStyle = "#0b0f12"; g.fillRect(0, 0, w, h);
  g.strokeStyle = "#1f3a2a";
  for (let s = 0; s <= samples.length; s += fs) { const x = (s / samples.length) * w; g.beginPath(); g.moveTo(x, 0); g.lineTo(x, h); g.stroke(); }
  const vals = samples.filter((v) => v !== null);
  if (!vals.length) { drawMark(canvas, g, samples, mark); return; }
  const lo = Math.min(...vals), hi = Math.max(...vals), span = Math.max(0.5, hi - lo);
  g.strokeStyle = "#7CFC9A"; g.lineWidth = 1.5; g.beginPath();
  let pen = false;
  samples.forEach((v, i) => {
    if (v === null) { pen = false; return; }
    const x = (i / samples.length) * w, y = h - 8 - ((v - lo) / span) * (h - 16);
    if (pen) g.lineTo(x, y); else g.moveTo(x, y);
    pen = true;
  });
  g.stroke();
  drawMark(canvas, g, samples, mark);
}

function row(tbody, cells) {
  tbody.append(el("tr", {}, ...cells.map((c) => el("td", { text: c === null || c === undefined ? "" : String(c) }))));
}

async function showBed(bed) {
  const enc = encodeURIComponent(bed);
  $("bed-title").textContent = bed;
  const known = state.snapshot && state.snapshot.beds.find((b) => b.bed === bed);
  // Ten seconds of ECG, or up to 30 so that a recent risk alarm's onset is on the strip.
  let secs = 10;
  if (known && known.risk_alarm_onset_ms && known.latest) {
    secs = Math.min(30, Math.max(10, Math.ceil((known.latest.window_end_ms - known.risk_alarm_onset_ms) / 1000) + 4));
  }
  const [strip, scores, alarms, events, monitor] = await Promise.all([
    api(`/api/beds/${enc}/strip?secs=${secs}`), api(`/api/beds/${enc}/scores?limit=200&since=${Date.now() - 4 * 3600e3}`),
    api(`/api/beds/${enc}/alarms`), api(`/api/beds/${enc}/events`), api(`/api/beds/${enc}/monitor_alarms`),
  ]);
  if (state.route !== "bed" || state.bed !== bed) return;
  await showMonitorAlarms(enc, monitor);
  if (state.route !== "bed" || state.bed !== bed) return;
  const tileData = state.snapshot && state.snapshot.beds.find((b) => b.bed === bed);
  const one = tileData && tileData.latest ? oneLead(tileData.latest.leads || []) : null;
  $("bed-state").textContent = tileData ? `${tileData.status} · ${fmtAge(tileData.data_age_secs)}${one ? " · " + one.long : ""}` : "";
  const onset = tileData ? tileData.risk_alarm_onset_ms : null;
  const strips = $("strips");
  strips.replaceChildren();
  if (strip.ok) {
    strip.body.strip.leads.forEach((lead, i) => {
      if (!lead) return;
      const c = el("canvas", { class: "strip", "aria-label": `lead slot ${i + 1}` });
      strips.append(el("div", { text: ["Primary lead", "Secondary lead", "Third lead"][i] }), c);
      drawStrip(c, lead, strip.body.strip.fs, markOf(lead, strip.body.strip.fs, strip.body.strip.end_ms, onset));
    });
  }
  const sb = $("bed-scores").tBodies[0];
  sb.replaceChildren();
  for (const s of ((scores.body && scores.body.scores) || []).slice().reverse()) {
    const members = (s.members || []).map((m) => `${m.name} ${m.prob === null ? "–" : Math.round(m.prob * 100) + "%"}`).join(", ");
    row(sb, [fmtTime(s.window_end_ms), s.status, s.score === null ? "—" : `${Math.round(s.score * 100)}%`, members]);
  }
  const ab = $("bed-alarms").tBodies[0];
  ab.replaceChildren();
  for (const a of (alarms.body && alarms.body.alarms) || []) {
    const rule = a.rule ? `≥ ${Number(a.rule.on.toPrecision(2))} in ${a.rule.k} of ${a.rule.n}, ${a.rule.validated ? "validated" : a.rule.derived ? "derived, not validated" : "not validated"}` : "";
    const onset = a.onset_ms == null ? "" : fmtTime(a.onset_ms) + (a.run_onset_ms == null ? "" : ` (VT run from ${fmtTime(a.run_onset_ms)})`);
    row(ab, [fmtTime(a.raised_ms), a.kind, onset, rule, a.value === null ? "" : a.value.toFixed(2),
      a.acked_by ? `${a.acked_by} ${fmtTime(a.acked_ms)}` : "", a.silenced_by ? `${a.silenced_by} ${fmtTime(a.silenced_ms)}` : "", fmtTime(a.cleared_ms)]);
  }
  const eb = $("bed-events").tBodies[0];
  eb.replaceChildren();
  for (const e of ((events.body && events.body.events) || []).slice(-100).reverse()) {
    row(eb, [fmtTime(e.at_ms), e.kind, JSON.stringify(e.detail)]);
  }
}

// ---- health banner (every view): storage faults and model faults ----

function faultText(h) {
  const s = h.storage || {};
  const out = [];
  if (s.fault) {
    out.push(`STORAGE FAULT since ${fmtTime(s.fault.since_ms)}: ${s.fault.error}. Scoring continues; ` +
      `${s.backlog_rows} rows held in memory (of ${s.backlog_capacity}) until the database can be written.`);
  }
  if (s.backlog_dropped_rows > 0) out.push(`${s.backlog_dropped_rows} stored rows were lost to a full backlog.`);
  for (const m of h.models || []) {
    if (m.faults > 0) out.push(`Model ${m.name} failed on ${m.faults} windows (last: ${m.last_fault}); scores went on without it.`);
  }
  return out.join(" ");
}

async function refreshHealth() {
  const r = await api("/api/health");
  state.health = r.ok ? r.body : null;
  const text = state.health ? faultText(state.health) : "";
  $("fault").textContent = text;
  $("fault").hidden = !text;
}

// ---- system view ----

async function showSystem() {
  const [ens, models] = await Promise.all([api("/api/ensemble"), api("/api/models")]);
  if (state.route !== "system") return;
  const box = $("system");
  box.replaceChildren();
  if (!ens.ok) { box.append(el("p", { text: "not available" })); return; }
  const e = ens.body;
  const kv = el("div", { class: "kv" });
  const add = (k, v) => kv.append(el("strong", { text: k }), el("span", { text: v }));
  const lat = e.latency_ms || {};
  add("Budget", `${e.slo_ms} ms end to end`);
  add("Latency (last 5 min)", lat.n ? `p50 ${lat.p50.toFixed(0)} · p95 ${lat.p95.toFixed(0)} · p99 ${lat.p99.toFixed(0)} ms over ${lat.n} windows` : "no scores yet");
  add("Ensemble", `${e.members.map((m) => `${m.name} v${m.version}`).join(", ")} (${e.source}${e.rung ? `, ladder rung ${e.rung}` : ""})`);
  kv.append(el("strong", { text: "Configured members" }), configuredMembers(e));
  add("Placement", e.plan.map((p) => `${p.model} on ${p.device} ×${p.workers} (batch ≤ ${p.batch_cap})`).join("; "));
  add("Composer", e.composer.enabled ? `${e.composer.compositions} compositions${e.composer.composing ? ", composing now" : ""}${e.composer.last_error ? `, last error: ${e.composer.last_error}` : ""}` : "off");
  const w = e.windows;
  add("Windows", `${w.scored} scored, ${w.partial} partial, ${w.superseded} superseded, ${w.dropped} dropped, ${w.insufficient_signal} insufficient signal`);
  const h = state.health;
  if (h) {
    const s = h.storage;
    add("Health", h.status === "ok" ? "ok" : `degraded: ${h.problems.join("; ")}`);
    add("Storage", s.fault ? `FAULT since ${fmtTime(s.fault.since_ms)} (${s.fault.error}), ${s.fault.retries} retries, ${s.backlog_rows} rows waiting`
      : `writable, ${s.committed_scores} scores committed`);
    const r = h.alarm_rule;
    if (r) {
      const th = (x) => (x < 0.1 ? x.toPrecision(2) : x.toFixed(2));
      add("Risk alarm rule", `on ≥ ${th(r.on)}, off < ${th(r.off)}, ${r.k} of ${r.n} hops of ${r.hop_secs} s` +
        (r.validated ? " (validated for this ensemble)" : ""));
      if (!r.validated) {
        const why = r.derived
          ? "Not validated for this ensemble: derived from the rules validated for the zoo's other ensembles (same share of positive validation windows)."
          : "Not validated for this ensemble: the configured fallback (risk_alarm_on/off, no persistence) serves.";
        kv.append(el("strong", { text: "" }), el("span", { class: "rule-note", text: `${why} holmes zoo rules says why no rule of the zoo's book serves it; holmes evaluate --revalidate chooses again the rules of members retrained since, holmes evaluate --save-rule one for this ensemble.` }));
      }
    }
    add("Storage backlog", `${s.backlog_rows} of ${s.backlog_capacity} rows; ${s.backlog_dropped_rows} dropped, ${s.fault_episodes} fault episodes since start`);
    if (h.lead_sets) kv.append(el("strong", { text: "Lead sets covered" }), leadSets(h.lead_sets));
    const l = h.hl7;
    add("HL7 link", !l ? "off" : `${l.connected ? "connected to" : "NOT CONNECTED to"} ${l.receiver}; ` +
      `${l.backlog} waiting${l.oldest_pending_ms ? ` (oldest queued ${fmtTime(l.oldest_pending_ms)})` : ""}, ` +
      `last acknowledgement ${l.last_ack_ms ? fmtTime(l.last_ack_ms) : "none yet"}, ${l.parked} parked` +
      (l.last_parked ? ` (last: ${l.last_parked.code} ${l.last_parked.reason})` : "") +
      (l.dropped_observations ? `, ${l.dropped_observations} observations dropped` : "") +
      (l.last_error && !l.connected ? `; ${l.last_error}` : ""));
    const f = h.fhir;
    add("FHIR link", !f ? "off" : `${f.connected ? "connected to" : "NOT CONNECTED to"} ${f.receiver}; ` +
      `${f.backlog} waiting${f.oldest_pending_ms ? ` (oldest queued ${fmtTime(f.oldest_pending_ms)})` : ""}, ` +
      `last acceptance ${f.last_ack_ms ? fmtTime(f.last_ack_ms) : "none yet"}, ${f.parked} parked` +
      (f.last_parked ? ` (last: ${f.last_parked.code} ${f.last_parked.reason})` : "") +
      (f.dropped_observations ? `, ${f.dropped_observations} observations dropped` : "") +
      (f.last_error ? `; last error: ${f.last_error}` : ""));
  }
  add("Model faults", e.members.map((m) => `${m.name}: ${m.faults}`).join(", "));
  if (models.ok) {
    const z = models.body.zoo || {};
    add("Zoo", `${Object.keys(z.available || {}).length} models available, ${(z.failures || []).length} failed loads`);
  }
  box.append(kv);
  const user = state.me && state.me.user;
  if (user && (user.role === "engineer" || user.role === "admin") && e.composer.enabled) {
    const msg = el("span", { class: "recompose-result" });
    box.append(el("p", {},
      el("button", { type: "button", id: "recompose", text: "Recompose now", onclick: async () => {
        const r = await post("/api/ensemble/recompose");
        msg.textContent = r.ok ? " recomposing…" : ` ${(r.body && r.body.error) || "refused"}`;
      } }), msg));
  }
}

// The configured members (`ensemble.members`), and whether they are what serves: the composer
// may serve others (its plan for this ward, or a lower rung of its ladder under load).
function configuredMembers(e) {
  const names = e.configured_members.join(", ");
  const serving = e.members.map((m) => m.name).sort().join(",");
  if (serving === [...new Set(e.configured_members)].sort().join(",")) {
    return el("span", { id: "configured-members", text: `${names}: serving` });
  }
  const note = e.composed_plan && e.composed_plan.configured_note;
  const why = e.source !== "plan"
    ? "not all of them serve"
    : e.rung
      ? `the composer serves the ensemble above instead (stepped down to ladder rung ${e.rung})`
      : `the composer serves the ensemble above instead (its plan for this ward${note ? `: ${note}` : ""})`;
  return el("span", { id: "configured-members", class: "warn", text: `${names}: ${why}` });
}

// Which lead sets a monitor can send the serving ensemble scores, with a warning when one
// is not covered (a bed whose monitor sends only that gets no score).
function leadSets(ls) {
  const sets = [["II only", ls.primary_only], ["V only", ls.secondary_only], ["both", ls.both]];
  const text = sets.map(([name, ok]) => `${name} ${ok ? "✓" : "✗"}`).join(", ");
  const missing = sets.filter(([, ok]) => !ok).map(([name]) => name);
  if (!missing.length) return el("span", { id: "lead-sets", text });
  return el("span", { id: "lead-sets", class: "warn",
    text: `${text} — beds whose monitor sends ${missing.join(" or ")} get no score` });
}

// ---- routing ----

function route() {
  const h = location.hash || "#/";
  const m = h.match(/^#\/bed\/(.+)$/);
  state.route = m ? "bed" : h === "#/system" ? "system" : "ward";
  state.bed = m ? decodeURIComponent(m[1]) : null;
  $("view-ward").hidden = state.route !== "ward";
  $("view-bed").hidden = state.route !== "bed";
  $("view-system").hidden = state.route !== "system";
  if (state.route === "bed") showBed(state.bed);
  if (state.route === "system") showSystem();
  render();
}

window.addEventListener("hashchange", route);
setInterval(() => {
  if (state.route === "bed") showBed(state.bed);
  if (state.route === "system") showSystem();
}, 5000);
setInterval(() => { $("clock").textContent = new Date().toLocaleTimeString(); tickAges(); }, 1000);
setInterval(refreshHealth, 5000);
route();
refreshMe();
refreshHealth();
