// Package broker is Fibril's embeddable engine: topics split into partitions,
// durable consumer groups with leased at-least-once delivery, dead-lettering,
// retention and backpressure. A program can import it and get durable queues
// in-process; the network server is a thin layer over its async API.
//
// What it owns: the topic/group catalog (ids are never reused), one actor
// goroutine per partition that owns all of that partition's state (the data
// log, the group state machines, the leases, the event log and snapshots), and
// the routing of subjects to topics.
//
// What it must never do: touch sockets or know the wire protocol; let anything
// but a partition's actor mutate that partition's state; block a caller of an
// Async method (they return ErrQueueFull instead); report a publish as stored
// before the log says it is durable under the topic's policy; forget a settled
// offset (the ack frontier plus range sets keep every ack, however far ahead).
//
// Per offset and group the state machine is Ready → Inflight (leased) →
// Settled, with Inflight → Ready on nack, lease expiry or owner release, and
// Inflight → DeadLettering → Settled on reject or when max_deliveries is
// reached. Delivery counts are persisted in a per-partition event log
// (group-committed with the data) plus periodic snapshots; leases are not, so
// after a crash every un-settled delivery is handed out again.
package broker
