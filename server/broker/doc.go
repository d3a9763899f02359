// Package broker is Fibril's embeddable engine: topics split into partitions,
// durable consumer groups with leased at-least-once delivery, dead-lettering,
// retention and backpressure. A program can import it and get durable queues
// in-process (see Example); the network server is a thin layer over its
// async API.
//
// What it owns: the topic/group catalog (ids are never reused), one actor
// goroutine per partition that owns all of that partition's state (the data
// log, the group state machines, the leases, the event log and snapshots), and
// the routing of subjects to topics.
//
// What it must never do: touch sockets or know the wire protocol; let anything
// but a partition's actor mutate that partition's state; block a caller of an
// Async method (they return ErrQueueFull instead); report a publish or a
// settle before the log says it is durable under the topic's policy; deliver
// a message that is not durable; forget a settled offset (the ack frontier
// plus span sets keep every ack, however far ahead); settle a damaged
// record in a group's name, or reuse or remove a topic directory the
// catalog does not list.
//
// # State machine
//
// Per offset and group: Ready → Inflight (leased) → Settled, with Inflight →
// Ready on nack (optionally after a delay), lease expiry or owner release,
// and Inflight → DeadLettering → Settled on reject or when max_deliveries is
// reached. Settled is final; a handle is valid only while its attempt is the
// offset's delivery count. An ordered group (GroupConfig.Ordered
// "partition") hands out only its lowest unsettled offset, and only while
// no other is pending, so each partition's messages go out one after
// another in offset order (groupState.takeOrdered); one ordered by key
// ("key") does so per Fibril-Key, parking a record whose key another
// offset holds and promoting it when that one settles (keyorder.go). On a topic with TTLs
// (message_ttl_ms, allow_msg_ttl and the Nats-TTL header) a group's head
// record past its deadline is settled undelivered or dead-lettered
// (GroupConfig.OnExpiry) before anything is handed out (ttl.go); on a
// topic with delays (allow_msg_delay) a head record not yet due is held
// back for the group (a pending entry without a delivery, an evDefer
// event, delay.go) while the records after it flow on. Delivery counts, settles and dead-letter decisions
// go to a per-partition event log, group-committed with the data, plus a
// snapshot every Options.SnapshotEvery events (temp file, fsync, rename);
// Open loads the snapshot and replays the events after it. A snapshot drops
// only the events the one before it covered, so Topic.History keeps about
// one window of past events across snapshots and restarts. Leases are not
// persisted: after a crash every unsettled delivery is handed out again, with
// its delivery count intact.
//
// # Operations and metrics
//
// Group.Pause/Resume (persisted in the catalog), Topic.Purge (a purge event
// settles everything stored for every group and raises the partition's
// purge floor, kept in the snapshot as group id 0) and Broker.Requeue (dead
// letters back to their Fibril-Subject through the dead-letter topic's
// RequeueGroup, an internal group no listing shows) serve the admin API.
// Counters (GroupCounters, published) are plain fields of the actor's
// state, copied to atomics once per round; a group's counters are kept in
// the snapshot and recounted from the events after it, so they survive a
// restart;
// TopicInfo, GroupInfo and Broker.Stats read those without waiting for the
// actors. Options.Observer sees every commit's fsync time and batch size;
// Options.Stages records the stages of sampled publishes (Message.Received:
// pick-up, append, the fsync that made them durable, the completion).
// Topic.Browse, SeqAt, Events and History read a partition's messages and state
// events on its actor (copies: retention may unmap the log under a reader).
// Byte limits and gauges use the size ledger (4 bytes per retained message).
//
// TopicConfig.Compression (none, s2, zstd) is passed to the file-backed data
// logs as seglog.Options.Compression when a partition opens; event logs stay
// plain, and a custom Options.OpenStore decides for itself. It is fixed at
// creation (topics have no config update); the logs read segments written
// under any setting, so changing it would only need a reopen. Catalogs
// written before the field read as none.
//
// A poll is claimed by the first partition with a ready message, which
// serves what it has; while the poll wants more, it is handed at once to
// the other partitions in turn (with copies of what it gathered), and the
// answer goes out when the last commit of the tour is durable: the commits
// of the partitions run in parallel.
//
// Fsync is the partition's (syncer.go), for durability group and sync
// alike: the logs are opened with seglog.PolicyCaller, so they never fsync
// on their own except to seal a segment, and a completion runs only once a
// Sync has covered its records. Under group two lanes fsync behind the
// actor and share each fsync among the rounds written meanwhile; under sync
// the actor fsyncs each log its round wrote before the round's completions
// run (syncRound: one fsync per log per round, none shared, no side
// copies). Durability none opens the logs with seglog.PolicyNone, whose
// background fsync nobody waits for, and completes rounds at once.
//
// With durability group or sync a record is leased to a waiting poll or push
// subscription in the round that writes it, and the delivery is handed out
// with the publish's confirm, once the record and the delivery's event are
// both durable (one fsync round from publish to consumer instead of two).
// On a file log each round's events are also copied into the data log as a
// side record (sidecopy.go), so the data log's fsync makes the round's
// messages and events durable at once, and the event log is fsynced in the
// background; recovery restores from those copies the events a power cut
// took from the event log. Each log is fsynced by a lane of its own
// (syncer.go); where a side copy cannot stand in (a store whose
// SideRecords is false, checked once at open; a copy that found no room), a
// commit waits for both lanes, which run in parallel. If either log's fsync fails, nothing more is confirmed or
// handed out: every pending and later batch fails (the poll gets the error).
// A poll served while an fsync is in flight can only be answered after the
// next one, so until that one starts it keeps taking what is published
// (collecting polls, dispatch.go): one answer per fsync, not one per round.
// A crash between the two fsyncs can leave an event log recording the
// delivery of a record the data log lost; recovery forgets such deliveries
// (groupState.clampTo) so the offset counts as never delivered.
//
// # Damaged data
//
// Partitions open their logs with seglog.Options.Verify: every stored
// record is checked before a partition serves, so damage done while the
// broker was stopped refuses the Open with the file, offset and sequence.
// A record found damaged later (damage.go) is never settled in a group's
// name: the group stops before it in that partition, reported by an ERROR
// log, GroupInfo, Broker.Damaged (the admin listener's /readyz and
// metrics), until the partition is opened again after a restore or a
// repair.
//
// Files of the damage handling: damage.go (a group stopped at a damaged
// record), catalog.go and orphans.go (the sealed catalog, topic.json,
// orphaned directories), catjournal.go and catcommit.go (the catalog
// journal: one fsynced record per change, folded into the catalog),
// topictable.go (the routing snapshot, updated per create), idle.go and
// brokerlock.go (idle partitions close their logs, bounded by
// MaxOpenPartitions; the directory lock that keeps a second broker off
// meanwhile), check.go (Verify: fibril verify), repair.go
// (Repair: fibril repair), lost.go (ranges a repair recorded, settled as
// lost), scrub.go (the background scrub).
//
// # Replicated partitions
//
// With Options.OpenPartition a partition's logs may be replicated
// (server/replog): the opener hands a Replica, and the partition serves
// only while its Replica says this node does (role.go). Elsewhere each
// round's commands are answered ErrNotLeader; on becoming the server the
// actor rebuilds the state from the logs as Open does, and on losing it
// fails what waits. The snapshot file goes through Replica.WriteState so
// every replica holds the state the event log's truncation relies on.
// The broker imports nothing of raft.
//
// # Actors and the async API
//
// Commands reach a partition through a lock-free bounded ring (publish,
// settle, poll) and an unbounded control stack (catalog changes, owner
// release, cross-partition completions). The actor takes what arrived as one
// batch, appends the publishes with one write, applies settles and polls,
// expires leases, sends dead letters, hands ready messages to parked polls
// and push subscriptions, appends the round's events with one write, and runs
// the completions once the round is durable. With durability "group" two
// fsync lanes, a goroutine each started at its log's first fsync request,
// fsync the logs while the actor takes the next batch; with "sync" the
// actor fsyncs at the end of the round and no lane starts.
//
// The actor is built from parts, each a small type owning its fields, with
// its own tests: mailbox.go (mailbox: the ring, the control stack, the
// waker, close), round.go (roundInput: what a round took in), extent.go
// (extent: offsets, sizes, counters), commit.go (commitPipeline: the
// round's completions and the batches waiting for fsync), syncer.go
// (syncLanes, syncLane: the fsync lanes), sidecopy.go (sideCopies),
// eventlog.go (eventWriter: events and snapshots), swaprelease.go
// (swapGuard: maps of replaced compressed segments), retention.go
// (retention, retentionCut), lost.go (holeSet), timer.go (actorTimer),
// stats.go (partStats), dedup.go (dedupIndex: the message ids of the
// duplicate window, rebuilt from the data log), keyorder.go (keyOrder: the
// keys a group ordered by key holds, and what waits behind them).
// groupstate.go is each group's state machine;
// dispatch.go serves polls and subscriptions; partition.go holds the loop,
// the round and the glue between parts.
//
// Callbacks of the async API (Topic.PublishAsync, Group.PollAsync,
// Group.Subscribe, Broker.Settle) run on the partition's actor goroutine, or
// for a poll's timeout on a timer goroutine. They must be quick (copy,
// enqueue, return) and must not call blocking methods of this package.
// Delivery bytes handed to a callback are borrowed until it returns.
package broker
