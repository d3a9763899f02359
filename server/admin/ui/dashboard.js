// Fibril dashboard: polls /api/topics once a second and derives rates from
// the deltas of the counters between two polls. No framework, no build step.
"use strict";
(function () {
  const POLL_MS = 1000, HISTORY = 60;
  let prev = null;            // the previous answer, for rates
  const hist = new Map();     // topic -> recent in/s values, for sparklines

  const fmt = (n) => Number(n).toLocaleString("en-US");
  const rate = (v) => (v >= 100 ? v.toFixed(0) : v.toFixed(1));
  function bytes(n) {
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : n) + " " + u[i];
  }
  function cell(tr, text, cls, key) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    if (key) td.dataset.k = key;
    tr.appendChild(td);
    return td;
  }
  function spark(values) {
    const w = 120, h = 18, ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("class", "spark"); svg.setAttribute("width", w); svg.setAttribute("height", h);
    const top = Math.max(1, ...values);
    const pts = values.map((v, i) => `${(i * w) / Math.max(1, HISTORY - 1)},${h - 1 - (v / top) * (h - 2)}`);
    const pl = document.createElementNS(ns, "polyline");
    pl.setAttribute("points", pts.join(" "));
    svg.appendChild(pl);
    return svg;
  }
  function byName(list) {
    const m = new Map();
    for (const t of list || []) m.set(t.name, t);
    return m;
  }

  function render(ov) {
    const dt = prev ? (new Date(ov.time) - new Date(prev.time)) / 1000 : 0;
    const before = prev ? byName(prev.topics) : new Map();
    const perSec = (now, then) => (dt > 0 && then !== undefined ? Math.max(0, now - then) / dt : 0);

    const topics = document.querySelector("#topics tbody");
    const groups = document.querySelector("#groups tbody");
    const dlq = document.querySelector("#dlq tbody");
    topics.replaceChildren(); groups.replaceChildren(); dlq.replaceChildren();

    for (const t of ov.topics) {
      const old = before.get(t.name);
      const r = perSec(t.published, old && old.published);
      const h = hist.get(t.name) || [];
      h.push(r); if (h.length > HISTORY) h.shift();
      hist.set(t.name, h);

      const tr = document.createElement("tr");
      tr.dataset.topic = t.name;
      if (t.dead_letter) {
        cell(tr, t.name, "name");
        cell(tr, fmt(t.unsettled), t.unsettled > 0 ? "warn" : "", "unsettled");
        cell(tr, fmt(t.messages), "", "messages");
        cell(tr, fmt(t.published), "", "published");
        cell(tr, rate(r), "rate", "rate");
        const act = cell(tr, "");
        if (t.unsettled > 0) {
          const btn = document.createElement("button");
          btn.textContent = "requeue";
          btn.title = "publish these messages again to the topics of their original subjects";
          btn.addEventListener("click", () => requeue(t.name));
          act.appendChild(btn);
        }
        dlq.appendChild(tr);
      } else {
        cell(tr, t.name, "name");
        cell(tr, t.partitions.length);
        cell(tr, fmt(t.published), "", "published");
        cell(tr, rate(r), "rate", "rate");
        cell(tr, fmt(t.messages), "", "messages");
        cell(tr, fmt(t.unsettled), "", "unsettled");
        cell(tr, bytes(t.bytes), "", "bytes");
        cell(tr, "", "spark").appendChild(spark(h));
        topics.appendChild(tr);
      }

      const oldGroups = new Map(((old && old.groups) || []).map((g) => [g.name, g]));
      for (const g of t.groups) {
        const og = oldGroups.get(g.name);
        const gr = document.createElement("tr");
        gr.dataset.topic = t.name; gr.dataset.group = g.name;
        cell(gr, t.name, "name");
        cell(gr, g.name, "name");
        cell(gr, fmt(g.lag), "", "lag");
        cell(gr, fmt(g.ready), "", "ready");
        cell(gr, fmt(g.inflight), "", "inflight");
        cell(gr, fmt(g.settled), "", "settled");
        cell(gr, rate(perSec(g.settled, og && og.settled)), "rate", "settled-rate");
        cell(gr, g.config.dead_letter || "", "name");
        groups.appendChild(gr);
      }
    }
    document.getElementById("dlq-empty").hidden = dlq.children.length > 0;
    document.getElementById("conns").textContent =
      ov.connections >= 0 ? fmt(ov.connections) + " connections" : "connections n/a";
    document.getElementById("updated").textContent = new Date(ov.time).toLocaleTimeString("en-GB");
    prev = ov;
  }

  async function requeue(name) {
    const out = document.getElementById("dlq-result");
    out.textContent = "requeueing " + name + "…";
    try {
      const res = await fetch("/api/topics/" + encodeURIComponent(name) + "/requeue", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ max: 10000 }),
        credentials: "same-origin",
      });
      const body = await res.json();
      if (!res.ok) throw new Error(body.error || res.status);
      out.textContent = `${name}: requeued ${body.requeued}` + (body.skipped ? `, skipped ${body.skipped} (no topic captures their subject)` : "");
    } catch (e) {
      out.textContent = name + ": requeue failed: " + e.message;
    }
  }

  async function poll() {
    const st = document.getElementById("status");
    try {
      const res = await fetch("/api/topics", { cache: "no-store", credentials: "same-origin" });
      if (!res.ok) throw new Error(res.status + " " + res.statusText);
      render(await res.json());
      st.textContent = "live";
      st.className = "";
    } catch (e) {
      st.textContent = "error: " + e.message;
      st.className = "warn";
    }
    setTimeout(poll, POLL_MS);
  }
  poll();
})();
