// Package queue is Fibril as a library: durable, at-least-once work queues
// inside your Go program, with typed values, leases, retries and dead
// letters, kept in a directory. No server, no network: it runs Fibril's
// engine (server/broker) in-process, the same one the fibril server runs.
//
// The package owns the typed API: a DB (a directory of queues), Queue[T]
// with its Codec, deliveries and their settles, the worker pool of
// Consume, and the choice of Storage. It must never lose a message
// silently: a value it cannot decode is dead-lettered with the reason, and
// a delivery fetched but not handled is given back. It knows nothing of
// sockets; durability, leases and recovery are the engine's.
//
// # Getting started
//
// Open a directory, declare a queue of your type, publish, consume:
//
//	db, err := queue.Open("/var/lib/myapp/queues", queue.Options{})
//	defer db.Close()
//	orders, err := queue.Declare(db, "orders", queue.Config[Order]{})
//	err = orders.Publish(ctx, Order{ID: 1})          // returns once fsynced
//	ds, err := orders.Fetch(ctx, 10)                  // leases up to 10
//	for _, d := range ds {
//		process(d.Value)                              // d.Value is an Order
//		err = d.Ack(ctx)                              // done for good
//	}
//
// Example, ExampleQueue_Consume (a worker pool), ExampleRetryAfter (a
// delayed retry), Example_gracefulShutdown (in-flight work given back) and
// Example_boltstore run as tests.
//
// # Leases, acks and retries
//
// A fetched message is leased to its consumer for Config.Lease (30s by
// default). Settle it before the lease ends: Ack (done, never delivered
// again), Nack(delay) (delivered again after delay: a delayed retry) or
// Reject (dead-lettered now); Extend keeps a long job's lease. A lease that
// runs out makes the message ready again, and the engine counts attempts
// (Delivery.Attempt): after Config.MaxDeliveries (5) the message goes to the
// dead-letter queue, "$DLQ.<queue>.<group>", with its reason in the
// Fibril-Reason header (Queue.DeadLetters reads it). Consume runs a worker
// pool and settles from each handler's result: nil acks, RetryAfter(d, err)
// retries after d, Reject(err) dead-letters, any other error retries at once.
//
// Every consumer of a queue's group competes for its messages; declaring
// the same queue with another Config.Group gives that group every message
// too (fan-out).
//
// # Typed values
//
// Config.Codec turns values into bytes: JSON by default, Bytes for
// []byte, CodecFuncs or any Codec for your own format. A message the codec
// cannot decode (an old schema, a bad producer) is never handed to your
// code and never dropped: Fetch copies it to the dead-letter queue with
// Fibril-Reason: decode_error and the error text in Fibril-Error, then acks
// the original.
//
// # Durability: what Publish promises
//
//	policy            Publish returns after         survives a crash of   cost
//	DurabilitySync    its own fsync                 the process, the OS   one fsync per publish
//	DurabilityGroup   an fsync shared with others   the process, the OS   one fsync per round (default)
//	DurabilityNone    the write                     the process (files)   no fsync
//
// Group is the default because it keeps sync's promise at a fraction of the
// cost when several goroutines publish: they share each fsync. A single
// publisher waiting for each publish pays one fsync per message under both;
// publish from several goroutines to amortize it. Acks follow the same
// policy. BENCHMARKS.md ("The embedded queue") has the figures.
//
// # What survives a crash
//
// Every message whose Publish returned nil under sync or group, and every
// ack that returned nil, survives a kill -9 and a power cut: on Open the
// message is there, or the acked message never comes back. Leases do not
// survive: every message that was in flight is ready again after Open,
// its attempt count kept, so a handler may run twice for one message (at
// least once: make handlers idempotent). A publish that returned an error,
// or was cut by the crash, may or may not be stored. Under none, the
// latest publishes and acks may be lost: with the segment log only by a
// power cut, with boltstore by any crash (its unsynced appends wait in
// memory, flushed every 100 ms). With Memory nothing survives the process.
// Damaged data (a flipped bit, a truncated file) refuses the Open with the
// file and offset instead of being served; fibril verify and fibril repair
// take over from there.
//
// # Storage
//
// Each partition of each queue keeps two logs: its messages and its
// consumer events. Options.Storage decides where:
//
//   - nil (the default): Fibril's segment log, files under the directory:
//     memory-mapped reads, group commit, checksums on every record.
//   - Memory: in memory (seglog.MemStore), nothing on disk but the small
//     catalog; OpenMemory opens such a DB in a temporary directory.
//   - boltstore.New or boltstore.Open (package queue/boltstore): the logs in
//     buckets of a bbolt database, so a program that already ships one
//     keeps its queues' messages in it. Each bbolt commit fsyncs and
//     carries the pending writes of every queue in the file (a group
//     commit across queues); Example_boltstore opens a DB on one, and the
//     boltstore package doc says what each durability means there.
//
// Any seglog.Store can serve (OpenLog); storetest.Run (package
// server/seglog/storetest) checks one against the contract.
//
// # Caveats
//
//   - The directory holds the engine's catalog and each partition's
//     consumer-state snapshot as small files whatever the Storage; a DB
//     opened on it holds its lock.
//   - Ordering holds within a partition for first deliveries; a nack or an
//     expired lease delivers that message again later, after others.
//   - Deliveries of Fetch are copies: Value, Data and Header stay valid
//     after the settle.
//   - Queue names are subjects: dots separate tokens, no wildcards, no
//     spaces. Names starting with "$DLQ." are dead-letter queues and hold
//     raw bytes.
//   - DB.Engine gives the engine itself for what the typed API leaves out
//     (several subjects per queue, browsing, requeueing dead letters).
package queue
