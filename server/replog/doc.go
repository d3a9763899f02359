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
//   - The applied mark (applied.go): the applied index and each log's
//     next seq, written (temp -> fsync -> rename) only after both local
//     logs are fsynced, every Config.MarkEvery entries or 8 MiB, at
//     each state file and at Close, so Applied never over-reports.
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
//   - Write a local log except from a committed entry, or truncate one
//     that lacks records (a gap is ErrCorrupt).
//   - Block in Append, or hold more than Config.MaxPendingBytes pending.
//   - Claim in the applied mark more than the fsynced local logs hold.
//
// # Caveats
//
//   - Raft snapshots are descriptors (the mark), not the segment files:
//     a replica behind a leader's compacted raft log cannot catch up
//     (Restore fails with ErrNeedsFiles and its group stops). Open sets
//     cluster.Config.CompactBehindMatch so a leader never compacts past
//     a replica's match index; a follower compacts as SnapshotEvery
//     says, so after it becomes leader a replica that lagged behind its
//     compaction needs the file transfer (a later slice).
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
