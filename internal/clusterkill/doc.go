// Package clusterkill owns the leader-kill test of a real cluster (issue
// 26): three `fibril serve` processes on loopback, each with its own data
// directory, joined over mutual TLS with certificates from certgen; a
// publisher (1 KiB messages, confirms on, a window of unconfirmed
// publishes, on any node since publishes are forwarded) and a consumer
// that polls every node in turn and acks what it gets; and a loop that
// finds a partition's leader (as the nodes' GET /api/cluster names it,
// once a poll of the partition was served), kills it
// with SIGKILL, measures how long until a publish to that partition is
// confirmed and a poll served from it again, and restarts it on its
// directory. Config.Victim makes the victim a follower instead, or node
// i % Nodes at cycle i (with Config.Graceful, SIGTERM: a rolling
// restart). Every operation goes into a history (internal/history),
// which, after a final drain, the checker judges: lost, unexpected,
// acked-then-redelivered and the rest of its categories.
//
// It must never leave a process running after Run returns, never kill a
// process it did not start, and never judge a run whose drain did not
// finish. It asserts nothing on time: resume times are figures in the
// report, and only a partition without service for Config.HangAfter (a
// hang) fails a run.
//
// # Caveats
//
//   - The leader is the one the live nodes' admin listeners name (each
//     node runs one on loopback); every node serves POLLs (forwarded), so
//     where a poll is served only says the partition is served again.
//   - A publish answered -ERR is recorded as unknown, not as refused: a
//     forwarded publish whose link to the leader broke is answered
//     not_leader although the leader may have stored it. Likewise an ACK
//     answered -ERR.
//   - Resume times include the publisher's and consumer's own reaction
//     (a dead connection seen, the next node dialled, a 200 ms poll wait).
package clusterkill
