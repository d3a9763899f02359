// Fibril dashboard, Cluster panel: polls /api/cluster (monitor or admin
// role) and lists the nodes, who leads the catalog, and each partition's
// leader, term, commit index and its followers' lag. The panel stays hidden
// on a single node (the answer names no node) and for a caller the endpoint
// refuses. Followers and their lag are known to a partition's leader only:
// other nodes name the leader whose dashboard shows them.
"use strict";
(function () {
  const POLL_MS = 2000;
  const panel = document.getElementById("cluster");
  const note = document.getElementById("cl-note");
  const nodes = document.querySelector("#cl-nodes tbody");
  const parts = document.querySelector("#cl-parts tbody");

  function cell(tr, text, cls, key) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    if (key) td.dataset.k = key;
    tr.appendChild(td);
    return td;
  }

  function render(v) {
    panel.hidden = !v.node;
    if (!v.node) return;
    nodes.replaceChildren();
    parts.replaceChildren();
    for (const n of v.nodes) {
      const tr = document.createElement("tr");
      tr.dataset.node = n.name;
      cell(tr, n.name + (n.name === v.node ? " (this node)" : ""), "name", "name");
      cell(tr, n.client || "not announced yet", "name", "client");
      cell(tr, n.leader_of_meta ? "leader" : "", "name", "catalog");
      nodes.appendChild(tr);
    }
    for (const p of v.partitions) {
      const tr = document.createElement("tr");
      tr.dataset.topic = p.topic; tr.dataset.partition = p.partition;
      cell(tr, p.topic, "name");
      cell(tr, p.partition);
      cell(tr, p.leader || "none (election)", p.leader ? "name" : "name warn", "leader");
      cell(tr, p.term, "", "term");
      cell(tr, p.commit, "", "commit");
      let lag;
      if (p.followers) lag = p.followers.map((f) => `${f.name}: ${f.lag}`).join(", ");
      else lag = p.leader ? `known to ${p.leader}` : "";
      cell(tr, lag, p.followers && p.followers.some((f) => f.lag > 0) ? "name warn" : "name", "lag");
      parts.appendChild(tr);
    }
    note.textContent = `this node: ${v.node} · ${v.nodes.length} nodes · ${v.partitions.length} partitions` +
      (v.unanswered ? ` · ${v.unanswered} raft groups did not answer in time` : "");
  }

  async function poll() {
    try {
      const res = await fetch("/api/cluster", { cache: "no-store", credentials: "same-origin" });
      if (res.ok) render(await res.json());
      else panel.hidden = true;
    } catch (e) {
      note.textContent = "cluster: " + e.message;
    }
    setTimeout(poll, POLL_MS);
  }
  poll();
})();
