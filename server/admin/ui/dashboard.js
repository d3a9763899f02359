// Fibril dashboard: polls /api/topics once a second and derives rates from
// the deltas of the counters between two polls; charts.js draws them over
// time. No framework, no build step.
"use strict";
(function () {
  const POLL_MS = 1000;
  let prev = null;            // the previous answer, for rates

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
        cell(gr, g.config.ordered || "", "name", "ordered");
        cell(gr, g.config.dead_letter || "", "name");
        cell(gr, fmt(g.redelivered || 0), "", "redelivered");
        cell(gr, fmt(g.dead_lettered || 0), g.dead_lettered > 0 ? "warn" : "", "dead-lettered");
        const pa = cell(gr, "");
        const pb = document.createElement("button");
        pb.textContent = g.paused ? "resume" : "pause";
        pb.addEventListener("click", () => groupOp(t.name, g.name, g.paused ? "resume" : "pause"));
        pa.appendChild(pb);
        groups.appendChild(gr);
      }
    }
    document.getElementById("dlq-empty").hidden = dlq.children.length > 0;
    document.getElementById("conns").textContent =
      ov.connections >= 0 ? fmt(ov.connections) + " connections" : "connections n/a";
    document.getElementById("updated").textContent = new Date(ov.time).toLocaleTimeString("en-GB");
    if (window.FibrilCharts) window.FibrilCharts.push(ov);
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

  async function postJSON(path) {
    const res = await fetch(path, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: "{}", credentials: "same-origin",
    });
    const body = await res.json();
    if (!res.ok) throw new Error(body.error || res.status);
    return body;
  }
  async function groupOp(topic, group, op) {
    const out = document.getElementById("dlq-result");
    try {
      await postJSON("/api/topics/" + encodeURIComponent(topic) + "/groups/" + encodeURIComponent(group) + "/" + op);
    } catch (e) {
      out.textContent = `${topic}/${group}: ${op} failed: ${e.message}`;
    }
  }

  // Event-log browser: messages by sequence or time, state events, and one
  // message's history.
  const bf = {
    form: document.getElementById("browse-form"), topic: document.getElementById("b-topic"),
    part: document.getElementById("b-part"), from: document.getElementById("b-from"),
    time: document.getElementById("b-time"), next: document.getElementById("b-next"),
    note: document.getElementById("b-note"), table: document.getElementById("b-table"),
    history: document.getElementById("b-history"), mode: "messages",
  };
  const partURL = () => "/api/topics/" + encodeURIComponent(bf.topic.value) + "/partitions/" + Number(bf.part.value || 0);
  async function getJSON(path) {
    const res = await fetch(path, { cache: "no-store", credentials: "same-origin" });
    const body = await res.json();
    if (!res.ok) throw new Error(body.error || res.status);
    return body;
  }
  function head(cols) {
    const tr = document.createElement("tr");
    for (const c of cols) { const th = document.createElement("th"); th.textContent = c; th.className = "l"; tr.appendChild(th); }
    bf.table.tHead.replaceChildren(tr);
  }
  async function browse(mode) {
    bf.mode = mode;
    bf.history.replaceChildren();
    const tb = bf.table.tBodies[0];
    try {
      let q = "?limit=20&from=" + Number(bf.from.value || 0);
      if (mode === "messages" && bf.time.value) q = "?limit=20&time=" + encodeURIComponent(bf.time.value);
      const page = await getJSON(partURL() + "/" + mode + q);
      tb.replaceChildren();
      if (mode === "messages") {
        head(["seq", "time", "subject", "bytes", "data"]);
        for (const m of page.messages) {
          const tr = document.createElement("tr");
          tr.className = "msg"; tr.dataset.seq = m.seq;
          cell(tr, m.seq, "", "seq"); cell(tr, new Date(m.time).toLocaleString("en-GB"));
          cell(tr, m.subject, "name"); cell(tr, fmt(m.size));
          cell(tr, (m.encoding ? "[" + m.encoding + "] " : "") + m.data.slice(0, 80) + (m.truncated || m.data.length > 80 ? "…" : ""), "data");
          tr.addEventListener("click", () => history(m.seq));
          tb.appendChild(tr);
        }
        bf.note.textContent = `${page.messages.length} message(s) of ${page.topic}/${page.partition}`;
      } else {
        head(["record", "time", "kind", "group", "offset", "arg", "consumer"]);
        for (const e of page.events) {
          const tr = document.createElement("tr");
          cell(tr, e.record); cell(tr, new Date(e.time).toLocaleString("en-GB"));
          cell(tr, e.kind + (e.reason ? " (" + e.reason + ")" : ""), "", "kind"); cell(tr, e.group_name || e.group); cell(tr, e.offset); cell(tr, e.arg);
          cell(tr, e.owner_label || "", "", "owner");
          tb.appendChild(tr);
        }
        bf.note.textContent = `${page.events.length} state event(s) of ${page.topic}/${page.partition} (recent: the log is cut at each snapshot)`;
      }
      bf.from.value = page.next;
      bf.time.value = "";
      bf.next.disabled = false;
    } catch (e) {
      bf.note.textContent = "browse failed: " + e.message;
      bf.next.disabled = true;
    }
  }
  // historyLine says what one state event did to the message, and to whom.
  function historyLine(e) {
    const who = e.owner_label ? " " + e.owner_label : "";
    switch (e.kind) {
      case "deliver": return `delivered (attempt ${e.arg})` + (who ? " to" + who : "");
      case "settle":
        if (e.reason === "ack") return "acked" + (who ? " by" + who : "");
        if (e.reason === "dead_lettered") return "settled: dead-letter copy stored";
        if (e.reason === "dropped") return "settled: removed by retention before delivery";
        return "settled";
      case "nack": return "nacked" + (who ? " by" + who : "") + (e.arg > 0 ? ` (redeliver after ${(e.arg / 1e6).toFixed(0)} ms)` : "");
      case "expire": return `lease expired (attempt ${e.arg})` + (who ? " held by" + who : "");
      case "release": return `released (attempt ${e.arg}): connection closed` + (who ? " —" + who : "");
      case "dead_letter": return e.reason === "rejected" ? "rejected" + (who ? " by" + who : "") + ", dead-lettered" : "dead-lettered (max deliveries)";
      case "purge": return "purged";
      default: return e.kind;
    }
  }
  async function history(seq) {
    try {
      const h = await getJSON(partURL() + "/messages/" + seq + "/history");
      const ul = document.createElement("ul");
      const li = (text) => { const x = document.createElement("li"); x.textContent = text; ul.appendChild(x); };
      if (h.message) li(`published ${new Date(h.message.time).toLocaleString("en-GB")} on ${h.message.subject} (${h.message.size} bytes, crc ${h.message.crc})`);
      else li("no longer retained");
      for (const e of h.events) {
        li(`${new Date(e.time).toLocaleString("en-GB")} · ${historyLine(e)}` + (e.group_name ? " · group " + e.group_name : ""));
      }
      const title = document.createElement("h3");
      title.textContent = `History of ${h.topic}/${h.partition}:${h.seq}`;
      bf.history.replaceChildren(title, ul);
    } catch (e) {
      bf.history.textContent = "history failed: " + e.message;
    }
  }
  bf.form.addEventListener("submit", (ev) => { ev.preventDefault(); bf.from.value = bf.from.value || 0; browse("messages"); });
  document.getElementById("b-events").addEventListener("click", () => { bf.from.value = 0; browse("events"); });
  bf.next.addEventListener("click", () => browse(bf.mode));

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
