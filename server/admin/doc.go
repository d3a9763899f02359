// Package admin is Fibril's HTTP admin listener: /healthz and /readyz, the
// Prometheus /metrics endpoint, a JSON API over topics, groups and
// connections (read-only, except POST /api/topics/{dlq}/requeue, which moves
// dead letters back to their topics), and the embedded web dashboard that
// polls that API.
//
// What it owns: one net/http server on its own address (off unless a caller
// constructs one), a private Prometheus registry (no global state), and the
// translation of the engine's Info views into JSON and metrics at request
// time. Rates are not computed here: counters are exported and the dashboard,
// the TUI and Prometheus derive rates from deltas between scrapes.
//
// What it must never do: mutate the engine except through its exported API
// (the requeue publishes and acks like any client, through the group
// RequeueGroup), hold a lock or wait on a partition actor while answering a
// scrape, serve anything but /healthz and /readyz without the configured
// authorization, or log a secret.
//
// Caveats: the engine's numbers are "recent, not atomic" views. A group's
// Settled is derived (the topic's published count minus the group's lag), so
// it also counts messages stored before a group that starts at "new" and
// messages retention dropped unsettled.
// Counters the engine does not keep (delivered, acked, nacked, redelivered,
// dead-lettered totals, fsync latency, batch sizes, oldest unacked age) are
// not exported yet. Requeue is at least once: a crash between the publish
// and the ack in the dead-letter topic requeues that message twice.
package admin
