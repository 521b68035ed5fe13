// The admin page's charts, drawn with the vendored uPlot (static/uplot/, see VENDORED.md).
// Each <figure data-chart="/api/charts/..."> is filled from its JSON: {zone, x, series:[{label, unit, values}]};
// a <figure data-waterfall="/api/turns/ID"> draws a turn's model calls and tool runs on a time axis.
// No inline script: the page says where the data is, this file fetches and draws it.
(function () {
  "use strict";
  const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563"];
  const STATUS_COLORS = {ok: "#16a34a", cached: "#0891b2", error: "#dc2626", timeout: "#b91c1c", denied: "#7c3aed",
    invalid_args: "#d97706", unknown_tool: "#4b5563", awaiting_confirmation: "#ca8a04", skipped: "#64748b"};

  function width(figure) { return Math.max(320, Math.min(figure.clientWidth || 600, 1100)); }

  function number(v, unit) {
    if (v == null) { return "–"; }
    if (unit === "USD") { return "$" + v.toFixed(4); }
    if (unit === "ms") { return v.toFixed(0) + " ms"; }
    return Math.round(v).toLocaleString("en") + " " + unit;
  }

  function caption(figure, text) {
    const cap = document.createElement("figcaption");
    cap.textContent = text;
    figure.appendChild(cap);
  }

  function zoned(zone) { return function (ts) { return uPlot.tzDate(new Date(ts * 1e3), zone); }; }

  function seriesChart(figure, data) {
    const days = figure.dataset.kind === "days";
    const units = [];
    data.series.forEach(function (s) { if (units.indexOf(s.unit) < 0) { units.push(s.unit); } });
    const series = [{label: days ? "Day (" + data.zone + ")" : "Hour (" + data.zone + ")",
      value: days ? "{YYYY}-{MM}-{DD}" : "{YYYY}-{MM}-{DD} {HH}:00"}];
    data.series.forEach(function (s, i) {
      const color = STATUS_COLORS[s.label] || COLORS[i % COLORS.length];
      series.push({label: s.label + " (" + s.unit + ")", scale: s.unit, stroke: color, width: 2,
        spanGaps: true, dash: /p95$/.test(s.label) ? [6, 4] : undefined,
        points: {show: true, size: 6}, value: function (u, v) { return number(v, s.unit); }});
    });
    const axes = [{label: days ? "Day (" + data.zone + ")" : "Time (" + data.zone + ")"}];
    units.forEach(function (unit, i) {
      axes.push({scale: unit, label: unit, side: i === 0 ? 3 : 1, grid: {show: i === 0}, size: 70,
        values: function (u, vals) { return vals.map(function (v) { return unit === "USD" ? "$" + v : v.toLocaleString("en"); }); }});
    });
    const scales = {x: {time: true}};
    units.forEach(function (unit) { scales[unit] = {range: function (u, min, max) { return [0, max > 0 ? max * 1.1 : 1]; }}; });
    const values = [data.x].concat(data.series.map(function (s) { return s.values; }));
    return new uPlot({title: figure.dataset.title, width: width(figure), height: 260, tzDate: zoned(data.zone),
      series: series, axes: axes, scales: scales}, values, figure);
  }

  function steps(trace) {
    // Each step's start and end in ms from the turn's start (a step is recorded when it ends).
    const t0 = Date.parse(trace.turn.started_at);
    return trace.steps.map(function (s, i) {
      const end = Date.parse(s.at) - t0;
      const name = s.kind === "llm_call" ? "LLM " + s.model : "Tool " + s.tool_name;
      return {i: i, name: (i + 1) + ". " + name, start: Math.max(0, end - s.latency_ms), end: end,
        ms: s.latency_ms, status: s.status, llm: s.kind === "llm_call"};
    });
  }

  function waterfall(figure, trace) {
    const bars = steps(trace);
    if (!bars.length) { caption(figure, "No model calls or tool runs in this turn."); return null; }
    const xs = [];
    bars.forEach(function (b) { xs.push(b.start, b.end); });
    const x = Array.from(new Set(xs)).sort(function (a, b) { return a - b; });
    const series = [{label: "ms since the turn began", value: function (u, v) { return v == null ? "–" : v.toFixed(1) + " ms"; }}];
    const data = [x];
    bars.forEach(function (b) {
      const color = b.status === "ok" || b.status === "cached" ? (b.llm ? "#2563eb" : "#16a34a") : "#dc2626";
      series.push({label: b.name, stroke: color, width: 12, spanGaps: false,
        points: {show: true, size: 12, fill: color},  // a step too short for a bar still shows
        value: function (u, v) { return v == null ? "–" : b.ms.toFixed(1) + " ms, " + b.status; }});
      data.push(x.map(function (t) { return t >= b.start && t <= b.end ? b.i : null; }));
    });
    const names = bars.map(function (b) { return b.name; });
    return new uPlot({title: figure.dataset.title, width: width(figure), height: 80 + 28 * bars.length,
      series: series, scales: {x: {time: false}, y: {range: [-0.6, bars.length - 0.4]}},
      axes: [{label: "ms since the turn began", values: function (u, vals) { return vals.map(function (v) { return v + " ms"; }); }},
        {label: "step", size: 180, splits: function () { return bars.map(function (b) { return b.i; }); },
          values: function (u, vals) { return vals.map(function (v) { return names[v] || ""; }); }}]}, data, figure);
  }

  function draw(figure) {
    const url = figure.dataset.chart || figure.dataset.waterfall;
    return fetch(url, {credentials: "same-origin"}).then(function (r) {
      if (!r.ok) { throw new Error(url + ": " + r.status); }
      return r.json();
    }).then(function (data) {
      if (figure.chart) { figure.chart.destroy(); }
      figure.querySelectorAll("figcaption").forEach(function (c) { c.remove(); });
      figure.chart = figure.dataset.waterfall ? waterfall(figure, data) : seriesChart(figure, data);
      if (figure.chart) { figure.classList.add("drawn"); }
      if (!figure.dataset.waterfall && !data.x.length) { caption(figure, "No data in this range yet."); }
    }).catch(function (err) { caption(figure, "The chart could not be loaded (" + err.message + ")."); });
  }

  function drawAll() {
    return Promise.all(Array.from(document.querySelectorAll("figure[data-chart], figure[data-waterfall]")).map(draw));
  }

  window.bruceCharts = {drawAll: drawAll};
  drawAll();
})();
