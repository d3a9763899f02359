// Package cluster replicates logs over raft groups: durable raft storage,
// the Ready loop that drives etcd-io/raft's RawNode, a Node that runs many
// groups over one transport, and the seams (a Transport for raft
// messages, a StateMachine for committed entries) that the broker plugs a
// partition into. It knows nothing of topics or the wire protocol;
// sockets and TLS are package transport's, certificates package
// certgen's.
//
// # What it owns
//
//   - Storage (storage.go): a raft.Storage in one directory. Raft's
//     entries, hard states and snapshot marks are records of a seglog log
//     (log/), appended in the order a Ready gives them and replayed in
//     that order at Open: an entry at index i replaces every entry from i
//     on (a new leader's conflicting append), a received snapshot's mark
//     drops every entry, a compaction mark drops those it covers. One
//     append job (one Ready's writes) is one log batch with one fsync when
//     raft says it must sync, so a crash keeps a prefix of it and never a
//     hard state whose entries were lost. Snapshot files (snap/%020d.snap, CRC-checked) are written
//     temp -> fsync -> rename -> directory fsync before their mark, and
//     older ones are removed only once a newer mark is synced. Compaction
//     (CreateSnapshot) writes the hard state again after its mark, then
//     drops whole seglog segments below the first live entry.
//   - replica (replica.go): one replica as a step machine over raft's
//     RawNode with AsyncStorageWrites: propose, step, tick, and process,
//     which takes each Ready, sends the messages for other replicas at
//     once (a leader's appends leave while its own is fsynced) and
//     queues the local jobs. Each proposal carries a 16-byte envelope (a
//     nonce fresh at each open and a number) so that only the entry this
//     replica proposed completes it, never an entry of an earlier life or
//     of another replica.
//   - Local jobs (apply.go): raft's MsgStorageAppend and MsgStorageApply,
//     done in order by an append worker (Storage.Save, fsynced when raft
//     must have it durable) and an apply worker (the StateMachine,
//     received snapshots restored, a snapshot every Config.SnapshotEvery
//     entries, stored, compacting the raft log, only once raft knows
//     its index applied: raft scans its unapplied committed entries when
//     it campaigns, and must find them; a flush job stores a held one
//     when no other entry comes), each handing the job back to the loop,
//     which steps the responses it carries in their order: raft hears an
//     entry is stable or applied only once it is, and a follower
//     acknowledges only what it fsynced. At most maxLocalJobs are held; at the bound the loop
//     takes no Ready until one is done. Conf changes go to raft as the
//     loop routes their entries, so each apply job carries the conf
//     state a snapshot at its end records.
//   - Group (group.go): the loop goroutine that owns a replica and drives
//     it from a ticker, an inbox of received messages, a proposal channel
//     and the workers' completions, and the two workers.
//     Propose returns once the entry is committed (on a quorum, fsynced
//     there, since every replica persists before it acknowledges) and
//     applied on this replica; ProposeAsync (propose_async.go) returns at
//     once and reports the same outcome to a callback on the loop, with
//     at most Config.MaxPendingProposals queued or in flight (ErrBusy
//     past it), so a caller keeps many entries in flight without a
//     goroutine each; Leader and Config.OnLeader report the
//     leader as raft knows it, Status the role, term, commit and applied
//     indexes, campaigns, dropped messages and (on the leader) every
//     replica's match index, for metrics. Proposals and messages waiting
//     together share one Ready, hence one append job and one fsync.
//   - Node (node.go): one member of a cluster: a transport.Transport to
//     the seed peers and a Group per raft group it runs (MetaGroup, ID 0,
//     plus NodeConfig.Groups), each in Dir/groups/<id>, with the node's
//     raft ID (NodeID of its name) in every group. Messages for a group it
//     does not run are dropped and counted. Partition groups made after
//     Start (a topic created later) are added and closed at run time
//     (node_groups.go: AddGroup with the group's member names, CloseGroup,
//     DropGroup, which also removes the raft log); a node does not
//     remember them across a restart: its owner adds them again after
//     Start, and each resumes from its log. TransferLeadership hands the
//     groups it leads to followers, for a restart without an election.
//     ParsePeers (peers.go) reads a seed list (name@host:port, ...).
//   - Fetches (fetch.go): a state machine whose snapshots are
//     descriptors of data they do not carry fetches that data from
//     another replica (Group.Fetch, through Config.Fetch); the replica
//     asked answers with what its owner registered (Group.ServeFetch).
//     A Node sets every group's Config.Fetch to its transport's Fetch
//     and routes the fetches it receives to the group's replica here.
//   - The peer book (peerbook.go): the metadata group's state machine
//     wraps the caller's and takes out peer records (Node.ProposePeer):
//     once one is applied on a node, the node links to that peer, and its
//     book is saved in Dir/peers.json (temp -> fsync -> rename) and in
//     the metadata snapshots, so a joining node is reached without a
//     manual AddPeer, also after a restart.
//
// # What it must never do
//
//   - Report a proposal successful before it is committed and applied
//     (the test hook ackOnLocalAppend does exactly that, so that the
//     checker's test can show it catches such a build).
//   - Send a message before the state it depends on is on disk, or claim
//     after a crash an entry or hard state that was never fsynced.
//   - Remove the only snapshot file its records name.
//   - Block the goroutine of a caller that hands it messages (Step drops
//     when the inbox is full; raft retries).
//   - Take an entry it could not store or send (over MaxEntryBytes:
//     ErrTooLarge), or hold unbounded uncommitted entries on a leader
//     without a quorum (past MaxUncommittedBytes: ErrBusy).
//
// # Caveats
//
//   - A Node is started once and stopped once; a restart is a new Node
//     on the same config and directory.
//   - A new group's members are Config.Peers, stored as a snapshot at
//     index 1, term 1. Group.ProposeConfChange changes them one change at
//     a time (raft refuses a second while one is unapplied:
//     ErrConfChangeRefused); a replica added starts with Config.Join on
//     an empty directory and catches up from a snapshot. InitialState
//     returns the snapshot's conf state, and raft replays every committed
//     entry after the snapshot at open, even those the state machine
//     already holds, so that the conf changes among them are applied
//     again. A Node links to its seeds, to the peers of its book and to
//     what Node.AddPeer names. The book only grows: a removed node stays
//     in it (RemovePeer cuts its links until the next start), and a
//     metadata entry of the caller's must not start with the peer
//     record's prefix (0xFF "fibril-peer" 0x00).
//   - At open the replica resumes after the state machine's durable
//     applied index (StateMachine.Applied) when it is at or past the
//     latest snapshot, else restores that snapshot, as the apply
//     worker's first job (OpenGroup does not wait for it: a state
//     machine may fetch its data from a peer, package replog's does;
//     nothing counts as applied before it ends): an in-memory state
//     machine reports 0 and is rebuilt, a durable one (a partition's
//     segment log) is never handed an entry it holds. Applied past the
//     raft log's end is refused as ErrCorrupt (directories that do not
//     belong together).
//   - Config.CompactBehindMatch keeps a leader's log compaction behind
//     the lowest match index of the replicas its log still reaches (as
//     the leader last heard it, refreshed each tick; one already behind
//     the log's first index, as a replica added later, needs a snapshot
//     anyway and holds nothing back), for state machines whose data
//     their snapshots do not carry (package replog's, which fetches it:
//     Group.Fetch); a snapshot it held back is taken on the tick the
//     replicas catch up, with no entry needed; a follower, which
//     does not know the others' progress, compacts as SnapshotEvery
//     says, so a lagging replica may still need a snapshot after that
//     follower becomes leader.
//   - The raft log is a seglog log under PolicyCaller: it fsyncs only
//     when Save or CreateSnapshot says (and at segment rolls and Close).
//     A hard state saved after a local snapshot may carry an older commit
//     index (the apply worker ran ahead of the append worker); replay
//     raises it to the snapshot's index, which is committed.
//   - In async mode raft applies an entry only once it is stable here, so
//     a leader whose own fsync hangs commits nothing it can apply, though
//     its followers hold the entry: proposals wait for the leader's disk.
//   - ErrLeaderChanged, ErrClosed and a context timeout mean the outcome
//     is unknown: the entry may still be applied. A retry with the same
//     data can then apply it twice; deduplication belongs to the caller.
//   - Snapshots are held in memory whole and sent as one MsgSnap. A
//     Node's transport reports each one's outcome (Group.ReportSnapshot:
//     written, or dropped and failed, after which raft probes and sends
//     another); a Transport that does not (ReportsSnapshots false) has it
//     reported delivered at once. Over a Node's transport one larger
//     than a frame travels in chunks (package transport, snapshot.go),
//     assembled in Dir/snap-in, up to transport.Options.MaxSnapshot (1 GiB
//     by default; a larger one is dropped each time, counted as
//     Oversize). The snapshot's state-machine bytes still ride inside the
//     raft message rather than streaming from the snapshot file; a
//     state machine with large data keeps it out of the snapshot and
//     fetches it (Group.Fetch), as package replog does.
//   - Reads: Group.ReadIndex (read.go) waits until the replica applied
//     everything committed before the call, confirmed by a quorum, so a
//     state machine read after it is linearizable; a read raft drops
//     (no leader known) ends only by the caller's ctx.
//   - raft draws its randomized election timeouts from crypto/rand, so a
//     run with timeouts cannot replay. The deterministic tests turn them
//     off (the manualElections hook, with CheckQuorum and PreVote) and
//     call Campaign when their seed says; Group always runs with them on.
//   - The raft log's records are seglog records, so seglog's caveats about
//     torn tails and corruption hold for it.
package cluster
