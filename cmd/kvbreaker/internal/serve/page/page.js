// The status page: polls GET /v1/status every quarter second with the token
// the operator typed (kept for this tab only) and shows the open and
// half-open circuits; Reset force-closes one (DELETE /v1/circuits/HOST),
// except on kvbreaker dashboard (read_only), which never writes and so
// shows no Reset at all.
"use strict";
const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("kvbreaker-token") || "";
let timer;
// shownAt is when each host's row was first drawn (ms since the epoch): the
// page's own record of how soon it showed an opened circuit.
const shownAt = new Map();

function showError(msg) {
  $("error").textContent = msg;
  $("error").hidden = !msg;
}

async function api(method, path) {
  const res = await fetch(path, { method, headers: { authorization: "Bearer " + token } });
  const body = await res.json();
  if (!res.ok) throw new Error(body.detail || res.statusText);
  return body;
}

function cell(row, label, text, cls) {
  const td = document.createElement("td");
  td.dataset.label = label;
  td.textContent = text;
  if (cls) td.className = cls;
  row.appendChild(td);
  return td;
}

function fmtMS(v) { return v === null || v === undefined ? "not measured" : v.toFixed(2) + " ms"; }

function render(s) {
  const readOnly = s.read_only === true;
  $("readonly").hidden = !readOnly;
  $("unlisted").hidden = !s.unlisted;
  $("action").hidden = readOnly;
  const tbody = $("circuits").querySelector("tbody");
  const focused = document.activeElement && document.activeElement.dataset.host;
  tbody.replaceChildren();
  for (const c of s.circuits) {
    const tr = document.createElement("tr");
    tr.className = "state-" + c.state;
    tr.dataset.host = c.host;
    if (!shownAt.has(c.host)) shownAt.set(c.host, Date.now());
    tr.dataset.shownAt = String(shownAt.get(c.host));
    cell(tr, "Host", c.host, "host");
    cell(tr, "State", c.state);
    cell(tr, "Failures in window", String(c.failure_count));
    cell(tr, "Retry at", c.restrained_until ? c.restrained_until + " (in " + Math.ceil(c.retry_in_ms / 1000) + " s)" : "-");
    cell(tr, "Probe in flight", c.probing ? "yes" : "no");
    tbody.appendChild(tr);
    if (readOnly) continue;
    const td = cell(tr, "Action", "");
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = "Reset";
    b.dataset.host = c.host;
    b.setAttribute("aria-label", "Reset the circuit of " + c.host);
    b.addEventListener("click", () => reset(c.host));
    td.appendChild(b);
    if (focused === c.host) b.focus();
  }
  for (const h of shownAt.keys()) if (!s.circuits.some((c) => c.host === h)) shownAt.delete(h);
  $("none").hidden = s.circuits.length > 0 || s.unlisted;
  const d = s.decisions;
  const rows = readOnly ? [["Decisions", "none: this dashboard only reads the store"]] : [
    ["Decisions (send / hold / probe / drop)", `${d.send} / ${d.hold} / ${d.probe} / ${d.drop}`],
    ["Held and dropped", `${d.hold} held, ${d.drop} dropped`],
  ];
  rows.push(
    ["Store calls", `${s.store.calls} (${s.store.errors} failed)`],
    ["Store latency p50 / p99", `${fmtMS(s.store.p50_ms)} / ${fmtMS(s.store.p99_ms)}`],
    ["Clock offset to the store", s.store.clock_offset_ms === null ? "not measured" : `${fmtMS(s.store.clock_offset_ms)} ± ${fmtMS(s.store.clock_uncertainty_ms)}`],
    ["Mirror", s.mirror === null ? "off" : `${s.mirror.healthy ? "healthy" : "not healthy"} (${s.mirror.reason}), lag ${fmtMS(s.mirror.lag_ms)}`],
  );
  if (s.truncated) rows.push(["Listing", "more than 1000 keys: the first 1000 are shown"]);
  const dl = $("process");
  dl.replaceChildren();
  for (const [k, v] of rows) {
    const dt = document.createElement("dt");
    dt.textContent = k;
    const dd = document.createElement("dd");
    dd.textContent = v;
    dl.append(dt, dd);
  }
  $("updated").textContent = "Updated " + s.now;
}

async function poll() {
  clearTimeout(timer);
  try {
    render(await api("GET", "/v1/status"));
    showError("");
  } catch (e) {
    showError("Cannot read the status: " + e.message);
  }
  timer = setTimeout(poll, 250);
}

async function reset(host) {
  try {
    await api("DELETE", "/v1/circuits/" + encodeURIComponent(host));
    showError("");
  } catch (e) {
    showError("Reset of " + host + " failed: " + e.message);
  }
  poll();
}

$("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  token = $("token").value;
  sessionStorage.setItem("kvbreaker-token", token);
  poll();
});
if (token) poll();
