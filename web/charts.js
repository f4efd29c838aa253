// cgq dashboard: the job page's charts, in plain SVG drawn here (no
// library). Every point comes aggregated from the server (/api/jobs/ID/
// progress, curves, importance, sample, front, trials): a few hundred
// points whatever the job's size. Names and values that a trial or a spec
// wrote go in as text (textContent, <title> tooltips), never as markup.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const CHART_W = 520, CHART_H = 300;
const MARGIN = { l: 64, r: 16, t: 12, b: 44 };
const PALETTE = ["#1565c0", "#e65100", "#2e7d32", "#6a1b9a", "#c62828",
                 "#00838f", "#9e9d24", "#4e342e", "#ad1457", "#37474f"];

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function extent(values) {
  let lo = Infinity, hi = -Infinity;
  for (const v of values) {
    if (typeof v !== "number" || !isFinite(v)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (lo === Infinity) return [0, 1];
  if (lo === hi) return [lo - (lo ? Math.abs(lo) / 10 : 1), hi + (hi ? Math.abs(hi) / 10 : 1)];
  return [lo, hi];
}

// fmtTick: a tick's value with as many decimals as the ticks' spacing
// needs (one more than its first significant digit), so that labels stay
// short enough for the margin.
function fmtTick(v, step) {
  if (!isFinite(v)) return "";
  if (Math.abs(v) >= 1e5 || (v !== 0 && Math.abs(v) < 1e-4)) return Number(v.toPrecision(3)).toString();
  const d = step > 0 ? Math.min(6, Math.max(0, Math.ceil(-Math.log10(step)) + 1)) : 2;
  return Number(v.toFixed(d)).toString();
}

function ticks(lo, hi, n) {
  const step = (hi - lo) / n, out = [];
  for (let i = 0; i <= n; i++) out.push(lo + i * step);
  return out;
}

// frame draws axes with ticks and labels into a new <svg>; returns it and
// the scale functions.
function frame(xr, yr, xLabel, yLabel) {
  const root = svg("svg", { width: CHART_W, height: CHART_H, viewBox: "0 0 " + CHART_W + " " + CHART_H,
                            class: "chart" });
  const pw = CHART_W - MARGIN.l - MARGIN.r, ph = CHART_H - MARGIN.t - MARGIN.b;
  const sx = (x) => MARGIN.l + (x - xr[0]) / (xr[1] - xr[0]) * pw;
  const sy = (y) => MARGIN.t + ph - (y - yr[0]) / (yr[1] - yr[0]) * ph;
  root.appendChild(svg("rect", { x: MARGIN.l, y: MARGIN.t, width: pw, height: ph, class: "plot" }));
  const axes = svg("g", { class: "axes" });
  axes.appendChild(svg("line", { x1: MARGIN.l, y1: MARGIN.t + ph, x2: MARGIN.l + pw, y2: MARGIN.t + ph }));
  axes.appendChild(svg("line", { x1: MARGIN.l, y1: MARGIN.t, x2: MARGIN.l, y2: MARGIN.t + ph }));
  for (const t of ticks(xr[0], xr[1], 4))
    axes.appendChild(svg("text", { x: sx(t), y: MARGIN.t + ph + 14, "text-anchor": "middle" },
                         fmtTick(t, (xr[1] - xr[0]) / 4)));
  for (const t of ticks(yr[0], yr[1], 4))
    axes.appendChild(svg("text", { x: MARGIN.l - 4, y: sy(t) + 4, "text-anchor": "end" },
                         fmtTick(t, (yr[1] - yr[0]) / 4)));
  axes.appendChild(svg("text", { x: MARGIN.l + pw / 2, y: CHART_H - 6, "text-anchor": "middle",
                                 class: "xlabel" }, xLabel));
  axes.appendChild(svg("text", { x: 12, y: MARGIN.t + ph / 2, "text-anchor": "middle", class: "ylabel",
                                 transform: "rotate(-90 12 " + (MARGIN.t + ph / 2) + ")" }, yLabel));
  root.appendChild(axes);
  return { root, sx, sy };
}

// mark: a circle for a trial, its tooltip (<title>) and data-trial; hover
// writes "trial N: ..." into info.
function mark(f, x, y, cls, trial, text, info) {
  const c = svg("circle", { cx: f.sx(x), cy: f.sy(y), r: 4, class: cls });
  c.dataset.trial = trial;
  c.appendChild(svg("title", {}, text));
  c.addEventListener("mouseenter", () => { if (info) info.textContent = text; });
  return c;
}

function polyline(f, pts, cls, color) {
  const p = svg("polyline", { points: pts.map(([x, y]) => f.sx(x).toFixed(1) + "," + f.sy(y).toFixed(1)).join(" "),
                              class: cls, fill: "none" });
  if (color) p.setAttribute("stroke", color);
  return p;
}

function show(section, on) {
  document.getElementById(section).hidden = !on;
}

// --- best so far ---------------------------------------------------------------

function drawProgress(j, doc) {
  const box = document.getElementById("best-chart");
  show("best-section", doc.points.length > 0);
  if (!doc.points.length) return box.replaceChildren();
  // A step line: the best stays until the next improvement, up to the
  // last succeeded trial.
  const pts = doc.points.map((p) => [p.n, p.value]);
  const steps = [];
  pts.forEach(([x, y], i) => { if (i) steps.push([x, pts[i - 1][1]]); steps.push([x, y]); });
  steps.push([doc.done, pts[pts.length - 1][1]]);
  const f = frame(extent([0, doc.done]), extent(pts.map((p) => p[1])),
                  "trials succeeded, in finish order", "best " + doc.metric + " (" + doc.mode + ")");
  f.root.appendChild(polyline(f, steps, "best-line"));
  const info = document.getElementById("best-info");
  for (const p of doc.points) {
    const m = mark(f, p.n, p.value, "best-point", p.trial,
                   "trial " + p.trial + ": " + doc.metric + " " + fmtNum(p.value) + " (the " + p.n +
                   ". to succeed, " + fmtTime(p.t) + ")", info);
    m.dataset.value = p.value;
    f.root.appendChild(m);
  }
  box.replaceChildren(f.root);
}

// --- learning curves ----------------------------------------------------------------

function drawCurves(j, doc) {
  const box = document.getElementById("curves-chart");
  const withPts = doc.trials.filter((t) => t.points.length > 0);
  show("curves-section", withPts.length > 0);
  if (!withPts.length) return box.replaceChildren();
  const xs = withPts.flatMap((t) => t.points.map((p) => p[0]));
  const ys = withPts.flatMap((t) => t.points.map((p) => p[1]));
  const f = frame(extent(xs), extent(ys), withPts[0].x, doc.metric);
  const legend = el("ul", null, "legend");
  const info = document.getElementById("curves-info");
  withPts.forEach((t, i) => {
    const color = PALETTE[i % PALETTE.length];
    const line = polyline(f, t.points, "curve", color);
    line.dataset.trial = t.trial;
    const text = "trial " + t.trial + ": final " + doc.metric + " " + fmtNum(t.value) + ", " +
                 t.points.length + " reports";
    line.appendChild(svg("title", {}, text));
    line.addEventListener("mouseenter", () => { info.textContent = text; });
    f.root.appendChild(line);
    const li = el("li");
    const sw = el("span", "\u25a0", "swatch");
    sw.style.color = color;
    li.appendChild(sw);
    const a = el("a", "trial " + t.trial);
    a.setAttribute("href", "/jobs/" + j.job + "/trials/" + t.trial);
    li.appendChild(a);
    li.appendChild(document.createTextNode(" " + fmtNum(t.value)));
    legend.appendChild(li);
  });
  box.replaceChildren(f.root, legend);
}

// --- the Pareto front ------------------------------------------------------------------

function drawPareto(j, front, sample) {
  const box = document.getElementById("pareto-chart");
  const names = front.front.length ? Object.keys(front.front[0].values) : [];
  show("pareto-section", names.length >= 2);
  if (names.length < 2) return box.replaceChildren();
  const [mx, my] = names;
  const onFront = new Set(front.front.map((p) => p.trial));
  const others = sample.trials.filter((t) => !onFront.has(t.id) && t.metrics &&
                                             typeof t.metrics[mx] === "number" &&
                                             typeof t.metrics[my] === "number");
  const xs = front.front.map((p) => p.values[mx]).concat(others.map((t) => t.metrics[mx]));
  const ys = front.front.map((p) => p.values[my]).concat(others.map((t) => t.metrics[my]));
  const f = frame(extent(xs), extent(ys), mx, my);
  const info = document.getElementById("pareto-info");
  for (const t of others)
    f.root.appendChild(mark(f, t.metrics[mx], t.metrics[my], "pt", t.id,
                            "trial " + t.id + ": " + mx + " " + fmtNum(t.metrics[mx]) + ", " + my + " " +
                            fmtNum(t.metrics[my]), info));
  const pts = front.front.map((p) => [p.values[mx], p.values[my], p.trial])
                         .filter((p) => typeof p[0] === "number" && typeof p[1] === "number")
                         .sort((a, b) => a[0] - b[0]);
  f.root.appendChild(polyline(f, pts, "front-line"));
  for (const [x, y, trial] of pts)
    f.root.appendChild(mark(f, x, y, "front", trial,
                            "trial " + trial + ": " + mx + " " + fmtNum(x) + ", " + my + " " + fmtNum(y) +
                            " (on the front)", info));
  box.replaceChildren(f.root);
  document.getElementById("pareto-note").textContent =
    front.front.length + " trials on the front (highlighted), " + others.length +
    " others of " + sample.trials.length + " sampled; " + (names.length > 2 ? "the first two of " +
    names.length + " objectives" : "both objectives");
}

// --- parameter importance ------------------------------------------------------------------

function drawImportance(j, doc) {
  const box = document.getElementById("importance-chart");
  show("importance-section", doc.params.length > 0 && doc.trials > 1);
  if (!doc.params.length) return box.replaceChildren();
  const rowH = 22, labelW = 160, barW = CHART_W - labelW - 70;
  const root = svg("svg", { width: CHART_W, height: doc.params.length * rowH + 30, class: "chart" });
  doc.params.forEach((p, i) => {
    const y = i * rowH + 4;
    const g = svg("g", { class: "bar-row" });
    g.dataset.param = p.name;
    g.appendChild(svg("text", { x: labelW - 6, y: y + 14, "text-anchor": "end", class: "bar-name" }, p.name));
    g.appendChild(svg("rect", { x: labelW, y, width: Math.max(1, p.share * barW).toFixed(1), height: rowH - 6,
                                class: p.rough ? "bar rough" : "bar" }));
    g.appendChild(svg("text", { x: labelW + p.share * barW + 4, y: y + 14 },
                      (100 * p.share).toFixed(1) + "%"));
    g.appendChild(svg("title", {}, p.name + ": explains " + (100 * p.eps2).toFixed(1) +
                      "% of the variance on its own (" + p.bins + (p.numeric ? " bins" : " values") +
                      ", " + p.n + " trials)"));
    root.appendChild(g);
  });
  root.appendChild(svg("text", { x: labelW, y: doc.params.length * rowH + 22, class: "xlabel" },
                       "share of the variance the params explain on their own"));
  box.replaceChildren(root);
  document.getElementById("importance-note").textContent =
    "Method: " + doc.method + "; from " + doc.trials + " succeeded trials" +
    (doc.sampled ? " (sampled)" : "") + ". Interactions between params are not counted." +
    (doc.warning ? " Careful: " + doc.warning + "." : "");
}

// --- parallel coordinates ----------------------------------------------------------------------

const pc = { offset: 0, limit: 50 };

function drawParallel(j, page) {
  const box = document.getElementById("parallel-chart");
  const trials = page.trials.filter((t) => t.value !== null);
  show("parallel-section", j.objective !== null && (trials.length > 0 || pc.offset > 0));
  if (!trials.length) return box.replaceChildren();
  const names = [...new Set(trials.flatMap((t) => Object.keys(t.params || {})))].sort();
  const axes = names.map((n) => ({ name: n, get: (t) => t.params[n] }));
  axes.push({ name: j.objective.metric + " (" + j.objective.mode + ")", get: (t) => t.value, objective: true });
  const W = Math.max(CHART_W, 110 * axes.length), H = CHART_H, top = 24, bottom = 30;
  const root = svg("svg", { width: W, height: H, class: "chart parallel" });
  const ax = (i) => 50 + i * (W - 100) / Math.max(1, axes.length - 1);
  for (const a of axes) { // a numeric axis, or one point per distinct value
    const vals = trials.map(a.get).filter((v) => v !== undefined);
    a.numeric = vals.every((v) => typeof v === "number");
    if (a.numeric) a.range = extent(vals);
    else a.cats = [...new Set(vals.map((v) => JSON.stringify(v)))].sort();
    a.y = (v) => {
      if (v === undefined) return null;
      const frac = a.numeric ? (v - a.range[0]) / (a.range[1] - a.range[0])
                             : (a.cats.indexOf(JSON.stringify(v)) + 0.5) / a.cats.length;
      return top + (1 - frac) * (H - top - bottom);
    };
  }
  const info = document.getElementById("parallel-info");
  trials.forEach((t, r) => {
    const pts = [];
    axes.forEach((a, i) => { const y = a.y(a.get(t)); if (y !== null) pts.push(ax(i).toFixed(1) + "," + y.toFixed(1)); });
    const line = svg("polyline", { points: pts.join(" "), class: "pc-line", fill: "none",
                                   stroke: PALETTE[Math.min(PALETTE.length - 1, Math.floor(10 * r / trials.length))] });
    line.dataset.trial = t.id;
    const text = "trial " + t.id + " (rank " + (pc.offset + r + 1) + "): " +
                 names.map((n) => n + "=" + fmtNum(t.params[n])).join(", ") + " \u2192 " + fmtNum(t.value);
    line.appendChild(svg("title", {}, text));
    line.addEventListener("mouseenter", () => { info.textContent = text; });
    root.appendChild(line);
  });
  axes.forEach((a, i) => {
    const g = svg("g", { class: "axes" });
    g.appendChild(svg("line", { x1: ax(i), y1: top, x2: ax(i), y2: H - bottom }));
    g.appendChild(svg("text", { x: ax(i), y: H - 10, "text-anchor": "middle", class: "xlabel" }, a.name));
    if (a.numeric) {
      g.appendChild(svg("text", { x: ax(i) + 4, y: top - 6 }, fmtNum(a.range[1])));
      g.appendChild(svg("text", { x: ax(i) + 4, y: H - bottom + 12 }, fmtNum(a.range[0])));
    } else {
      for (const c of a.cats) g.appendChild(svg("text", { x: ax(i) + 4, y: a.y(JSON.parse(c)) + 4 }, fmtNum(JSON.parse(c))));
    }
    root.appendChild(g);
  });
  box.replaceChildren(root);
  document.getElementById("pc-range").textContent =
    "ranks " + (pc.offset + 1) + "\u2013" + (pc.offset + page.trials.length) + " of " + page.total;
  document.getElementById("pc-prev").disabled = pc.offset === 0;
  document.getElementById("pc-next").disabled = pc.offset + page.trials.length >= page.total;
}

// --- all of them ----------------------------------------------------------------------------------

// renderCharts draws every chart of job j (called by app.js's poll; the
// charts of a big running job refresh less often, as each reads the job).
let chartsAt = 0, chartsFinal = false, chartsJob = null;

async function renderCharts(j, force) {
  chartsJob = j;
  const ended = TERMINAL_JOB.has(j.state);
  const every = j.suggested > 2000 ? 10000 : 0;
  if (!force && (chartsFinal || Date.now() - chartsAt < every)) return;
  chartsAt = Date.now();
  const base = "/api/jobs/" + j.job;
  if (j.objective) {
    const [prog, curves, imp, page] = await Promise.all([
      getJSON(base + "/progress"), getJSON(base + "/curves?limit=5"), getJSON(base + "/importance"),
      getJSON(base + "/trials?sort=rank&order=asc&state=succeeded&offset=" + pc.offset + "&limit=" + pc.limit),
    ]);
    drawProgress(j, prog);
    drawCurves(j, curves);
    drawImportance(j, imp);
    drawParallel(j, page);
    show("pareto-section", false);
  } else {
    const [front, sample] = await Promise.all([getJSON(base + "/front"), getJSON(base + "/sample?limit=300")]);
    drawPareto(j, front, sample);
    for (const s of ["best-section", "curves-section", "importance-section", "parallel-section"]) show(s, false);
  }
  chartsFinal = ended;
}

const TERMINAL_JOB = new Set(["finished", "cancelled", "failed"]);

function startCharts() {
  const redraw = () => chartsJob && renderCharts(chartsJob, true).catch((e) => setStatus(String(e.message || e), true));
  document.getElementById("pc-prev").addEventListener("click", () => {
    pc.offset = Math.max(0, pc.offset - pc.limit); redraw();
  });
  document.getElementById("pc-next").addEventListener("click", () => { pc.offset += pc.limit; redraw(); });
  document.getElementById("pc-limit").addEventListener("change", (e) => {
    pc.limit = Number(e.target.value); pc.offset = 0; redraw();
  });
}

// --- a trial's reports ----------------------------------------------------------------------------

const REPORT_CHARTS = 6;
const REPORT_POINTS = 500;

// drawReports: one small chart per numeric key of the trial's reports (at
// most REPORT_CHARTS of them), against its step (step, epoch or iteration,
// else the report's place), at most REPORT_POINTS points each.
function drawReports(reports) {
  const box = document.getElementById("reports-chart");
  const xName = ["step", "epoch", "iteration"].find((k) => reports.some((r) => typeof r[k] === "number"));
  const keys = [...new Set(reports.flatMap((r) => Object.keys(r)))]
    .filter((k) => k !== xName && reports.some((r) => typeof r[k] === "number")).sort()
    .slice(0, REPORT_CHARTS);
  const every = Math.max(1, Math.ceil((reports.length - 1) / (REPORT_POINTS - 1))); // with the last
  const charts = keys.map((k) => {
    const pts = [];
    reports.forEach((r, i) => {
      if ((i % every === 0 || i === reports.length - 1) && typeof r[k] === "number")
        pts.push([xName && typeof r[xName] === "number" ? r[xName] : i + 1, r[k]]);
    });
    const f = frame(extent(pts.map((p) => p[0])), extent(pts.map((p) => p[1])), xName || "report", k);
    const line = polyline(f, pts, "curve", PALETTE[0]);
    line.dataset.metric = k;
    line.dataset.points = pts.length;
    f.root.appendChild(line);
    return f.root;
  });
  box.replaceChildren(...charts);
}
