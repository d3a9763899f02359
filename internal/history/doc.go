// Package history owns the record of what clients saw during a fault run
// and the checker that judges it.
//
// A history is a file of JSON lines, one Op per client operation (publish,
// delivery, ack, nack, reject, extend) and one per injected fault or phase,
// each with the wall-clock times at which the client invoked it and saw it
// complete, the client process that made it, and its outcome: ok (the
// server answered yes), fail (the server answered no: the operation surely
// had no effect) or info (no answer: it may or may not have taken effect).
// Writer appends ops from many goroutines; Read loads a file back.
//
// Check reads a history and counts, per category (Categories), what the
// broker promised and did not keep: confirmed messages lost (split into
// prefix, middle and suffix per producer), deliveries of values never
// published, values stored twice, acked messages delivered again to the same
// group, deliveries inside another delivery's unexpired lease, two values
// at one partition:seq (split brain), and messages that end neither acked
// nor dead-lettered. Every judgement is conservative: an operation whose
// outcome is unknown, or whose timing overlaps the one it would contradict,
// never counts against the broker.
//
// The package must never talk to a broker, start processes or read the
// clock: it is pure functions over recorded ops, so a history replays to
// the same verdict anywhere.
//
// # Caveats
//
//   - Times are the clients' wall clock (one machine, so one clock); the
//     broker's own clock may be stepped by a fault and is then known only
//     within the window of the clock op (see lease checking in check.go).
//   - Leases are not persisted (server/broker/recover.go): a restart of the
//     node in between excuses a delivery inside an earlier lease, unless
//     Config.LeasesSurviveRestart is set (for a replicated cluster).
//   - Dead-lettering is judged by value: a value delivered from
//     Config.DeadLetterTopic counts as dead-lettered for every group.
package history
