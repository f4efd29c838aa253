// cgq dashboard: the jobs page (/), a job page (/jobs/ID), a trial page
// (/jobs/ID/trials/T) and the nodes page (/nodes), polling the
// coordinator's JSON API (/api/) every POLL_MS. Everything that came from a
// trial or a spec is put into the page as text (textContent, never
// innerHTML), so a param value like <img src=x onerror=alert(1)> shows as
// those characters. No framework, no build step, no inline script (the
// server's Content-Security-Policy allows only files from itself).
"use strict";

const POLL_MS = 2000;
// While a job page's event stream (/api/events) is open, events trigger
// the refresh and the poll only backs it up.
const LIVE_POLL_MS = 10000;
let liveEvents = false;
const PAGE = 50;

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function fmtNum(v) {
  if (v === null || v === undefined) return "";
  if (typeof v !== "number") return typeof v === "string" ? v : JSON.stringify(v);
  if (Number.isInteger(v)) return String(v);
  return Number(v.toPrecision(6)).toString();
}

function fmtDuration(s) {
  if (s === null || s === undefined) return "";
  if (s < 60) return s.toFixed(s < 10 ? 2 : 1) + "s";
  const m = Math.floor(s / 60), h = Math.floor(m / 60);
  if (h) return h + "h" + String(m % 60).padStart(2, "0") + "m";
  return m + "m" + String(Math.floor(s % 60)).padStart(2, "0") + "s";
}

function fmtTime(t) {
  return t ? new Date(t * 1000).toLocaleString() : "";
}

function setStatus(text, bad) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.className = bad ? "status error" : "status";
}

async function getJSON(url) {
  const r = await fetch(url, { credentials: "same-origin", cache: "no-store" });
  const body = await r.json().catch(() => ({ error: "not JSON" }));
  if (!r.ok) throw new Error(r.status + ": " + (body.error || r.statusText));
  return body;
}

// poll calls fn now and every POLL_MS after it settles (LIVE_POLL_MS
// while events come), until fn returns true (a page whose data can no
// longer change). Returns a function that runs it again now (once more
// after the run under way, if one is).
function poll(fn) {
  let timer = null, busy = false, again = false, done = false;
  const tick = async () => {
    if (done) return;
    if (busy) { again = true; return; }
    busy = true;
    clearTimeout(timer);
    try {
      done = (await fn()) === true;
      setStatus((done ? "final, " : "updated ") + new Date().toLocaleTimeString() +
                (liveEvents ? " (live)" : ""), false);
    } catch (e) {
      setStatus(String(e.message || e), true);
    }
    busy = false;
    if (!done) timer = setTimeout(tick, again ? 0 : liveEvents ? LIVE_POLL_MS : POLL_MS);
    again = false;
  };
  tick();
  return tick;
}

// listen opens the job's event stream (job null: every job's, and the
// nodes'); an event (a trial started,
// finished, ...) runs kick within 100 ms to 1 s, several coalesced. If the stream
// cannot open (too many, an old server) the page keeps polling every
// POLL_MS; the browser retries it.
// ?live=0 on the page's address: poll only (behind a proxy that buffers
// event streams; or a headless browser's --dump-dom, which waits for the
// network to settle and a stream never does).
function listen(job, kick) {
  if (typeof EventSource === "undefined") return null;
  if (new URLSearchParams(location.search).get("live") === "0") return null;
  const es = new EventSource(job === null ? "/api/events"
                                          : "/api/events?job=" + encodeURIComponent(job));
  // A busy job's events come all the time: at most one refresh a second
  // (each reads the job's leaderboard), the first 100 ms after an event.
  let pending = null, last = 0;
  const soon = () => {
    if (pending) return;
    const wait = Math.max(100, 1000 - (Date.now() - last));
    pending = setTimeout(() => { pending = null; last = Date.now(); kick(); }, wait);
  };
  es.onopen = () => { liveEvents = true; document.body.dataset.live = "events"; };
  es.onerror = () => { liveEvents = false; document.body.dataset.live = "polling"; };
  es.onmessage = (e) => { document.body.dataset.lastEvent = e.lastEventId; soon(); };
  es.addEventListener("reset", soon);
  return es;
}

// --- the jobs page -----------------------------------------------------------

async function renderJobs() {
  const doc = await getJSON("/api/jobs?limit=100");
  const body = document.querySelector("#jobs tbody");
  const rows = [];
  for (const j of doc.jobs) {
    const tr = el("tr");
    tr.className = "state-" + j.state;
    const a = el("a", j.job);
    a.setAttribute("href", "/jobs/" + encodeURIComponent(j.job));
    const td = el("td");
    td.appendChild(a);
    tr.appendChild(td);
    tr.appendChild(el("td", j.name));
    tr.appendChild(el("td", j.state));
    tr.appendChild(el("td", j.done + " / " + (j.total === null ? "\u221e" : j.total), "num"));
    tr.appendChild(el("td", j.best ? fmtNum(j.best.value) + " (trial " + j.best.trial + ")" : "", "num"));
    tr.appendChild(el("td", fmtTime(j.created)));
    tr.appendChild(el("td", fmtDuration(j.duration), "num"));
    rows.push(tr);
  }
  body.replaceChildren(...rows);
  document.getElementById("empty").hidden = doc.jobs.length > 0;
}

// --- a job page --------------------------------------------------------------

const view = { sort: "rank", order: "asc", offset: 0, job: null, state: "" };

function fact(dl, name, value) {
  dl.appendChild(el("dt", name));
  dl.appendChild(el("dd", value));
}

// factLink: a fact whose value is a link (href built from numbers only).
function factLink(dl, name, text, href, id) {
  dl.appendChild(el("dt", name));
  const dd = el("dd");
  const a = el("a", text);
  a.setAttribute("href", href);
  if (id) a.id = id;
  dd.appendChild(a);
  dl.appendChild(dd);
}

function fmtBytes(n) {
  if (typeof n !== "number") return "";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + u[i];
}

// trialCheckpoint: the trial's checkpoint, pause and pbt lineage facts.
function trialCheckpoint(dl, job, t) {
  const c = t.checkpoint;
  if (c && typeof c === "object") {
    const step = c.step && typeof c.step === "object"
      ? Object.entries(c.step).map(([k, v]) => k + " " + fmtNum(v)).join(", ") : "";
    fact(dl, "checkpoint", [step, fmtBytes(c.size), c.files !== undefined ? c.files + " file(s)" : "",
      c.host ? "sealed on " + c.host : "", c.at ? fmtTime(c.at) : "",
      typeof c.sha256 === "string" ? "sha256 " + c.sha256.slice(0, 12) : ""]
      .filter((x) => x).join(" · "));
    fact(dl, "resumable checkpoints", t.checkpoints);
  }
  if (t.paused) fact(dl, "paused", t.paused);
  const lin = t.lineage;
  if (lin && typeof lin === "object" && Number.isInteger(lin.parent)) {
    factLink(dl, "continues", "trial " + lin.parent + (lin.step !== undefined ? " at step " +
      fmtNum(lin.step) : ""), "/jobs/" + job + "/trials/" + lin.parent, "lineage-parent");
    if (lin.changed && typeof lin.changed === "object")
      fact(dl, "perturbed", Object.entries(lin.changed).map(([k, v]) => k + " " +
        (Array.isArray(v) ? fmtNum(v[0]) + " → " + fmtNum(v[1]) : fmtNum(v))).join(", "));
  }
  const ex = t.exploited;
  if (ex && typeof ex === "object" && Number.isInteger(ex.by))
    factLink(dl, "continued as", "trial " + ex.by, "/jobs/" + job + "/trials/" + ex.by,
      "lineage-child");
}

async function renderJob() {
  const id = view.job;
  const [j, page] = await Promise.all([
    getJSON("/api/jobs/" + id),
    getJSON("/api/jobs/" + id + "/trials?offset=" + view.offset + "&limit=" + PAGE +
            "&sort=" + encodeURIComponent(view.sort) + "&order=" + view.order +
            (view.state ? "&state=" + encodeURIComponent(view.state) : "")),
  ]);
  document.title = "cgq: job " + j.job + " " + j.name;
  document.getElementById("title").textContent = "Job " + j.job + ": " + j.name;
  const frac = j.total ? Math.min(1, j.done / j.total) : 0;
  document.getElementById("bar").style.width = (100 * frac).toFixed(1) + "%";
  const dl = document.getElementById("facts");
  dl.replaceChildren();
  fact(dl, "state", j.state);
  fact(dl, "progress", j.done + " / " + (j.total === null ? "\u221e" : j.total) + " trials done");
  if (j.objective) fact(dl, "objective", j.objective.mode + " " + j.objective.metric);
  fact(dl, "best", j.best ? fmtNum(j.best.value) + " (trial " + j.best.trial + ")" : "none yet");
  fact(dl, "created", fmtTime(j.created));
  fact(dl, "duration", fmtDuration(j.duration));
  // ETA: the time so far per trial done, for the trials left (a rough
  // guess: it assumes the pace so far holds).
  if (j.state === "running" && j.total !== null && j.done > 0 && j.done < j.total)
    fact(dl, "ETA", "about " + fmtDuration(j.duration * (j.total - j.done) / j.done));
  if (j.blocked) fact(dl, "blocked", j.blocked);
  if (j.error) fact(dl, "error", j.error);
  const head = document.querySelector("#counts thead tr");
  const cells = document.querySelector("#counts tbody tr");
  head.replaceChildren();
  cells.replaceChildren();
  for (const [state, n] of Object.entries(j.counts)) {
    head.appendChild(el("th", state));
    cells.appendChild(el("td", n, "num"));
  }
  renderTrials(j, page);
  await renderCharts(j, false); // charts.js
  // Grouping reads every failed trial's error: only when there are some.
  const fails = j.counts.failed > 0 ? await getJSON("/api/jobs/" + id + "/failures")
                                    : { groups: [] };
  renderFailures(j, fails);
}

function renderFailures(j, fails) {
  document.getElementById("failures-section").hidden = fails.groups.length === 0;
  document.querySelector("#failures tbody").replaceChildren(...fails.groups.map((g) => {
    const tr = el("tr");
    tr.appendChild(el("td", g.count, "num"));
    tr.appendChild(el("td", g.error || "(no error text)"));
    const td = el("td");
    g.trials.forEach((t, i) => {
      if (i) td.appendChild(document.createTextNode(" "));
      const a = el("a", t);
      a.setAttribute("href", "/jobs/" + j.job + "/trials/" + t);
      td.appendChild(a);
    });
    tr.appendChild(td);
    return tr;
  }));
}

function renderTrials(j, page) {
  const params = new Set(), metrics = new Set();
  for (const t of page.trials) {
    Object.keys(t.params || {}).forEach((k) => params.add(k));
    Object.keys(t.metrics || {}).forEach((k) => metrics.add(k));
  }
  const cols = [
    { title: "trial", sort: "id", get: (t) => t.id, num: true,
      link: (t) => "/jobs/" + j.job + "/trials/" + t.id },
    { title: "state", sort: "state", get: (t) => t.state },
    { title: j.objective ? j.objective.metric + " (" + j.objective.mode + ")" : "value",
      sort: "rank", get: (t) => fmtNum(t.value), num: true },
  ];
  for (const p of [...params].sort())
    cols.push({ title: p, sort: "params." + p, get: (t) => fmtNum(t.params[p]) });
  for (const m of [...metrics].sort())
    cols.push({ title: m, sort: "metrics." + m, get: (t) => (t.metrics ? fmtNum(t.metrics[m]) : ""), num: true });
  cols.push({ title: "attempts", sort: "attempts", get: (t) => t.attempts, num: true });
  cols.push({ title: "node", sort: "node", get: (t) => t.node || "" });
  cols.push({ title: "duration", sort: "duration", get: (t) => fmtDuration(t.duration), num: true });
  cols.push({ title: "error", sort: null, get: (t) => t.error || "" });

  const head = document.querySelector("#trials thead tr");
  head.replaceChildren();
  for (const c of cols) {
    const th = el("th", c.title);
    head.appendChild(th);
    if (!c.sort) continue;
    th.dataset.sort = c.sort;
    if (c.sort === view.sort) th.className = "sorted-" + view.order;
    th.addEventListener("click", () => {
      if (view.sort === c.sort) view.order = view.order === "asc" ? "desc" : "asc";
      else { view.sort = c.sort; view.order = "asc"; }
      view.offset = 0;
      renderJob().catch((e) => setStatus(String(e.message || e), true));
    });
  }
  const rows = [];
  for (const t of page.trials) {
    const tr = el("tr");
    tr.className = "state-" + t.state;
    tr.dataset.trial = t.id;
    for (const c of cols) {
      const td = el("td", c.link ? null : c.get(t), c.num ? "num" : undefined);
      if (c.link) {
        const a = el("a", c.get(t));
        a.setAttribute("href", c.link(t));
        td.appendChild(a);
      }
      tr.appendChild(td);
    }
    rows.push(tr);
  }
  document.querySelector("#trials tbody").replaceChildren(...rows);
  const last = page.offset + page.trials.length;
  document.getElementById("range").textContent =
    page.total ? (page.offset + 1) + "\u2013" + last + " of " + page.total : "no trials yet";
  document.getElementById("prev").disabled = page.offset === 0;
  document.getElementById("next").disabled = last >= page.total;
}

// --- a trial page -------------------------------------------------------------

const TERMINAL = new Set(["succeeded", "failed", "stopped", "cancelled"]);

function kvRows(tbody, obj) {
  const rows = [];
  for (const k of Object.keys(obj || {}).sort()) {
    const tr = el("tr");
    tr.appendChild(el("th", k));
    tr.appendChild(el("td", fmtNum(obj[k])));
    rows.push(tr);
  }
  tbody.replaceChildren(...rows);
}

async function renderTrial(job, trial) {
  const t = await getJSON("/api/jobs/" + job + "/trials/" + trial);
  document.title = "cgq: job " + job + " trial " + trial;
  document.getElementById("title").textContent = "Job " + job + ", trial " + trial + ": " + t.state;
  const dl = document.getElementById("facts");
  dl.replaceChildren();
  fact(dl, "state", t.state);
  if (t.value !== null) fact(dl, "value", fmtNum(t.value));
  fact(dl, "attempts", t.attempts);
  if (t.node) fact(dl, "node", t.node);
  if (t.started) fact(dl, "started", fmtTime(t.started));
  if (t.finished) fact(dl, "finished", fmtTime(t.finished));
  if (t.duration !== null) fact(dl, "duration", fmtDuration(t.duration));
  if (t.error) fact(dl, "error", t.error);
  if (t.warning) fact(dl, "warning", t.warning);
  if (t.trial_dir) fact(dl, "directory", t.trial_dir);
  trialCheckpoint(dl, job, t);
  kvRows(document.querySelector("#params tbody"), t.params);
  kvRows(document.querySelector("#metrics tbody"), t.metrics);
  const runs = Object.entries(t.runs || {});
  document.getElementById("runs-section").hidden = runs.length === 0;
  document.querySelector("#runs tbody").replaceChildren(...runs.map(([stage, r]) => {
    const tr = el("tr");
    for (const v of [stage, r.attempt, r.node, fmtTime(r.started), fmtDuration(r.duration)])
      tr.appendChild(el("td", v));
    return tr;
  }));
  const reports = t.reports || [];
  document.getElementById("reports-none").hidden = reports.length > 0;
  drawReports(reports); // charts.js
  const keys = [...new Set(reports.flatMap((r) => Object.keys(r)))].sort();
  const head = document.querySelector("#reports thead tr");
  head.replaceChildren(...keys.map((k) => el("th", k)));
  document.querySelector("#reports tbody").replaceChildren(...reports.map((r) => {
    const tr = el("tr");
    for (const k of keys) tr.appendChild(el("td", fmtNum(r[k]), "num"));
    return tr;
  }));
  document.getElementById("log-section").hidden = !t.log;
  document.getElementById("log").textContent = t.log || "";
  return TERMINAL.has(t.state);
}

function startTrial() {
  const m = /^\/jobs\/(\d+)\/trials\/(\d+)$/.exec(location.pathname);
  if (!m) return;
  document.getElementById("back").setAttribute("href", "/jobs/" + m[1]);
  document.getElementById("back").textContent = "\u2190 job " + m[1];
  // The job's events refresh the page; once the trial has ended the stream
  // is closed (its place is for others) and the page stops.
  let es = null;
  const kick = poll(async () => {
    const done = await renderTrial(m[1], m[2]);
    if (done && es) {
      es.close();
      liveEvents = false;
      document.body.dataset.live = "ended";
    }
    return done;
  });
  es = listen(m[1], kick);
}

// --- the nodes page ------------------------------------------------------------

function ago(t) {
  return t ? fmtDuration(Math.max(0, Date.now() / 1000 - t)) + " ago" : "never";
}

async function renderNodes() {
  const [doc, devs] = await Promise.all([getJSON("/api/nodes"), getJSON("/api/devices")]);
  document.querySelector("#nodes tbody").replaceChildren(...doc.nodes.map((n) => {
    const tr = el("tr");
    tr.className = "state-" + n.state;
    tr.dataset.node = n.id;
    for (const v of [n.id, n.kind, n.state, n.hostname, fmtNum(n.free_cpus) + " / " + fmtNum(n.cpus),
                     fmtNum(n.free_gpus) + " / " + fmtNum(n.gpus), n.running, ago(n.last_seen)])
      tr.appendChild(el("td", v));
    return tr;
  }));
  document.getElementById("empty").hidden = doc.nodes.length > 0;
  document.getElementById("devices-section").hidden = devs.devices.length === 0;
  document.querySelector("#devices tbody").replaceChildren(...devs.devices.map((d) => {
    const tr = el("tr");
    tr.className = "state-" + d.state;
    tr.dataset.device = d.id;
    const tags = Object.entries(d.tags).map(([k, v]) => k + "=" + v).join(" ");
    for (const v of [d.id, d.state, d.node || "", tags, d.task || "", d.failures,
                     d.last_error || "", ago(d.updated)])
      tr.appendChild(el("td", v));
    return tr;
  }));
}

function startJob() {
  const m = /^\/jobs\/(\d+)$/.exec(location.pathname);
  if (!m) return;
  view.job = m[1];
  document.getElementById("state").addEventListener("change", (e) => {
    view.state = e.target.value;
    view.offset = 0;
    renderJob().catch((err) => setStatus(String(err.message || err), true));
  });
  document.getElementById("prev").addEventListener("click", () => {
    view.offset = Math.max(0, view.offset - PAGE);
    renderJob().catch((e) => setStatus(String(e.message || e), true));
  });
  document.getElementById("next").addEventListener("click", () => {
    view.offset += PAGE;
    renderJob().catch((e) => setStatus(String(e.message || e), true));
  });
  startCharts();
  listen(view.job, poll(renderJob));
}

document.addEventListener("DOMContentLoaded", () => {
  const page = document.body.dataset.page;
  if (page === "jobs") listen(null, poll(renderJobs)); // every job's events
  else if (page === "job") startJob();
  else if (page === "trial") startTrial();
  else if (page === "nodes") listen(null, poll(renderNodes)); // node.joined, .left, .dead, ...
});
