// Fibril dashboard charts: rates over time, drawn with uPlot (vendored in
// ui/vendor/uplot and embedded in the binary: no network). dashboard.js
// hands every /api/topics answer to FibrilCharts.push; each chart keeps the
// last KEEP samples (one a poll) and is redrawn with them.
"use strict";
(function () {
  const KEEP = 300; // five minutes at one poll a second

  // What is charted: each takes the totals of two polls and the seconds
  // between them, and returns a value (null: no value for that interval).
  const rate = (k) => (a, b, dt) => Math.max(0, b[k] - a[k]) / dt;
  const defs = [
    { id: "published", title: "published /s", color: "#39bae6", value: rate("published") },
    { id: "delivered", title: "delivered /s", color: "#7fd962", value: rate("delivered") },
    { id: "acked", title: "acked /s", color: "#95e6cb", value: rate("acked") },
    { id: "backlog", title: "backlog (unsettled messages)", color: "#ffb454", value: (a, b) => b.backlog },
    { id: "redelivered", title: "redeliveries /s", color: "#ff8f40", value: rate("redelivered") },
    {
      id: "fsync", title: "fsync latency, ms (mean over the interval)", color: "#d2a6ff",
      value: (a, b) => (b.syncs > a.syncs ? (b.syncNs - a.syncNs) / (b.syncs - a.syncs) / 1e6 : null),
    },
  ];

  // totals sums one answer over topics and groups (dead-letter topics'
  // publishes are not counted as published: they are dead letters).
  function totals(ov) {
    const s = { time: new Date(ov.time).getTime() / 1000, published: 0, delivered: 0, acked: 0, backlog: 0, redelivered: 0, syncs: 0, syncNs: 0 };
    for (const t of ov.topics || []) {
      if (!t.dead_letter) s.published += t.published;
      for (const g of t.groups || []) {
        s.delivered += g.delivered || 0;
        s.acked += g.acked || 0;
        s.redelivered += g.redelivered || 0;
        if (!t.dead_letter) s.backlog += g.lag || 0;
      }
    }
    if (ov.sync) { s.syncs = ov.sync.syncs || 0; s.syncNs = ov.sync.sync_time_ns || 0; }
    return s;
  }

  const times = [];
  const values = new Map(defs.map((d) => [d.id, []]));
  const charts = {};
  let prev = null;

  function make() {
    const box = document.getElementById("charts");
    if (!box || typeof uPlot === "undefined") return false;
    for (const d of defs) {
      const el = document.createElement("div");
      el.className = "chart";
      el.id = "chart-" + d.id;
      box.appendChild(el);
      charts[d.id] = new uPlot({
        title: d.title, width: Math.max(260, Math.floor(box.clientWidth / 3) - 16), height: 150,
        scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] } },
        legend: { show: false },
        axes: [
          {
            stroke: "#5c6773", grid: { stroke: "#1c2630" }, ticks: { stroke: "#1c2630" },
            space: 90, values: (u, ts) => ts.map((v) => new Date(v * 1000).toLocaleTimeString("en-GB")),
          },
          { stroke: "#5c6773", grid: { stroke: "#1c2630" }, ticks: { stroke: "#1c2630" }, size: 56 },
        ],
        series: [{}, { label: d.title, stroke: d.color, width: 1.5, fill: d.color + "22", spanGaps: false }],
      }, [[], []], el);
    }
    return true;
  }
  let ready = false;

  function push(ov) {
    if (!ready) ready = make();
    const cur = totals(ov);
    if (prev && cur.time > prev.time) {
      const dt = cur.time - prev.time;
      times.push(cur.time);
      for (const d of defs) values.get(d.id).push(d.value(prev, cur, dt));
      if (times.length > KEEP) {
        times.shift();
        for (const v of values.values()) v.shift();
      }
      if (ready) for (const d of defs) charts[d.id].setData([times, values.get(d.id)]);
    }
    prev = cur;
  }

  // charts is exposed for the browser test (server/admin/charts_browser_test.go).
  window.FibrilCharts = { push, charts, values, times };
})();
