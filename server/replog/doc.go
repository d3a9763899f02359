// Package replog replicates one partition's pair of logs (the data log
// and the event log) over one raft group (package cluster), as two
// seglog.Store values the broker's partition actor uses as it uses its
// file logs, plus the role and state-file capabilities the broker asks
// of a replicated partition (broker.Replica).
//
// # What it owns
//
//   - Log (log.go): a seglog.Store. On the serving leader Append assigns
//     seqs after what is applied and pending, keeps the records in a
//     bounded pending buffer (Config.MaxPendingBytes; Read and Scan serve
//     a pending seq from it) and proposes each batch as one raft entry
//     (split when it passes the group's entry size) without waiting, so
//     it never blocks the actor. Sync waits until every entry proposed
//     before it is committed (fsynced in a quorum's raft logs) and
//     applied here, then reports it durable: a confirm the broker gives
//     after a Sync means a quorum holds the message. TruncateFront is a
//     replicated entry too, proposed without waiting (Bounds moves when
//     it is applied).
//   - The state machine (apply.go): on every replica, the leader
//     included, committed entries are written into plain local seglogs
//     (dir/data, dir/events) at exactly their seqs. An entry is applied
//     only if its first seq is the next the log applies; one whose
//     predecessor of the same epoch was lost (refused by raft while a
//     later one was taken) is skipped on every replica alike, and its
//     epoch ends, so nothing after the loss is confirmed. Records a
//     local log already holds are skipped (raft's replay after a
//     restart is harmless); a local log ending before an entry that
//     must apply is ErrCorrupt, reported, never truncated.
//   - The applied mark (applied.go): the applied index, each log's
//     next seq and the local logs' generation, written (temp -> fsync
//     -> rename) only after both local logs are fsynced, every
//     Config.MarkEvery entries or 8 MiB, at each state file and at
//     Close, so Applied never over-reports.
//   - Restores from a peer (restore.go, serve.go): a raft snapshot is
//     the mark, not the logs. A replica handed one past its local logs
//     (a replica that lagged behind a compaction, one added to the
//     group later) fetches the logs and state files from a replica
//     that applied at least as far, the leader first, as one stream
//     through the group (cluster.Group.Fetch; over a Node, the cluster
//     link's mutual TLS), builds them as the next generation of its
//     local logs (every record's CRC and the stream's checked, all
//     fsynced), and switches by writing the mark that names it. A
//     failed attempt is retried after a backoff until it works or the
//     pair closes; the apply worker waits meanwhile, so nothing after
//     the snapshot is applied or served before the restored logs are
//     in place. Every replica answers such fetches (Group.ServeFetch),
//     one at a time.
//     Why a stream of records and not a copy of the segment files:
//     seglog's files are not self-contained (the LOCK file's front and
//     durable hints, preallocated tails, index, spare and trash files,
//     an active segment being written), while records read through the
//     Store API are whole and checked, and appended at their seqs
//     (seglog.Options.Start) make a log seglog vouches for; the
//     snapshot data cannot carry the logs, which are not small.
//   - Roles (pair.go): a replica serves (Serving) once it leads and its
//     barrier entry, proposed when it became leader, is applied: every
//     entry committed before its term is then in its local logs. A
//     change of leader or term, a stopped group or a lost entry ends
//     the serving epoch: pending entries fail with ErrNotLeader (their
//     outcome is unknown: they may still commit), and Notify tells the
//     owner. Entries carry the proposer and epoch.
//   - State files (WriteState): a file of the partition directory (the
//     broker's state.snap) replaced on every replica by an entry,
//     atomically and in order with the records, so a follower that
//     becomes leader after the event log's front was truncated still
//     has the group state that truncation relied on.
//
// # What it must never do
//
//   - Report a record durable (Sync, Durable) before it is committed
//     and applied here, or serve (Append) before everything committed
//     earlier is applied.
//   - Write a local log except from a committed entry (or, in a
//     restore, from a peer's copy of committed records), or truncate
//     one that lacks records (a gap is ErrCorrupt).
//   - Remove or change the local logs a mark names before a complete,
//     fsynced replacement is named by the next mark.
//   - Block in Append, or hold more than Config.MaxPendingBytes pending.
//   - Claim in the applied mark more than the fsynced local logs hold.
//
// # Caveats
//
//   - A restore fetches every record the source holds, also those the
//     replica already has, and the whole stream must arrive within
//     Config.RestoreTimeout; Open still sets
//     cluster.Config.CompactBehindMatch so that a leader's replicas
//     catch up from its raft log whenever they can.
//   - The switch closes the old local logs: a reader holding records
//     borrowed from them must not use them after it (a restore happens
//     only while the replica does not serve). Reads during the switch
//     may fail with seglog.ErrClosed.
//   - After a restore the local logs may hold more than the mark says
//     (the source's logs as they were when it sent them); raft's
//     entries after the snapshot are applied by the usual rule, so
//     the records present are skipped and a state file written by a
//     replayed entry is rewritten until the replay passes the source's
//     position.
//   - A state file rides in one raft entry: one over the group's
//     MaxEntryBytes fails (cluster.ErrTooLarge), and the broker keeps
//     its events instead of truncating them.
//   - The local logs are never compressed and keep no side records
//     (SideRecords false): the broker's commit waits for both logs'
//     Syncs, which wait for the same raft commits.
//   - The pair's directory must come from a replicated start: an Open
//     that finds local records without a mark refuses it (converting a
//     single-node partition is not supported).
//   - Entries a deposed leader proposed may still be applied after it
//     answered ErrNotLeader (raft keeps them if a quorum had them):
//     their publishes were reported failed with an unknown outcome, the
//     same as a lost connection.
package replog
