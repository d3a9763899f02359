// Package admin is Fibril's HTTP admin listener: /healthz and /readyz, the
// Prometheus /metrics endpoint, a JSON API over topics, groups and
// connections, operator actions (POST, JSON content type: pause/resume a
// group, purge a topic, requeue a dead-letter topic through
// broker.Requeue), the event-log browser (a partition's messages by offset
// or time, its consumer-state events, one message's history), the cluster
// view of a clustered server (GET /api/cluster and the fibril_raft_*
// series, from Options.Cluster; cluster.go), and the embedded web
// dashboard that polls that API.
//
// What it owns: one net/http server on its own address (off unless a caller
// constructs one), a private Prometheus registry (no global state), the
// SyncMetrics histograms fed by the engine's Observer, and the translation
// of the engine's Info views into JSON and metrics at request time. Rates
// are not computed here: counters are exported and the dashboard, the TUI
// and Prometheus derive rates from deltas between scrapes.
//
// What it must never do: mutate the engine except through its exported API,
// hold a lock or wait on a partition actor while answering a scrape (the
// browser and the operator actions do wait, bounded, on their own
// requests; the cluster view waits on the raft groups' status, bounded by
// clusterTimeout in all), serve anything but /healthz and /readyz without the configured
// authentication, serve an endpoint beyond what package access allows the
// caller's identity (403), accept a state change without a JSON content
// type, or log a secret.
//
// Caveats: the engine's numbers are "recent, not atomic" views. A group's
// Settled is derived (the topic's published count minus the group's lag), so
// it also counts messages stored before a group that starts at "new" and
// messages retention dropped unsettled. The engine's group counters
// (delivered, acked, ...) are kept across restarts (broker.GroupCounters). Each
// engine snapshot drops the events the one before it covered, so events and
// histories are recent only. A history names a delivery's connection only
// while the ConnSource remembers it (the server: open ones and the last
// 1024 closed); otherwise it says "conn <id>". Requeue is at least once: a crash between the publish and the ack
// in the dead-letter topic requeues that message twice.
package admin
