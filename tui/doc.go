// Package tui is `fibril tui`: a terminal UI (bubbletea) that connects to a
// Fibril server over the wire and shows, per topic and consumer group, how
// messages move between ready, in flight, acked and dead-lettered, with rates
// and sparklines, and can publish and consume test traffic on a key press.
//
// What it owns: the model that turns successive snapshots (TOPIC LIST /
// TOPIC INFO / GROUP INFO, read through one Go SDK connection) into rates,
// the screen, and the key actions (confirmed publishes, POLL + ACK). It
// speaks the wire only through the Go SDK (package sdk), with a timeout per
// call.
//
// What it must never do: change a topic or group the user did not ask it to
// (it only publishes when a key says so, and consumes and acks only as its
// own group DemoGroup, "fibril-tui-demo", which it creates on first use and
// deletes when it quits), hold more than one connection, or block the UI on the network (all
// wire calls run in bubbletea commands; the SDK keeps their answers in
// order).
//
// Caveats: rates are deltas between two polls about one interval apart.
// "acked" is derived (published minus ready minus in flight, minus what went
// to the dead-letter topic), so it also counts messages stored before a group
// that starts at "new"; "dead" is the group's own count (GROUP INFO
// dead_lettered, kept across restarts), the number the dashboard shows.
package tui
