// Package fibril is the Go client for the Fibril message broker.
//
// It owns one thing: speaking the Fibril wire protocol (SPEC.md) over one TCP
// or TLS connection on behalf of an application, in fibril mode (strict
// answers, publish confirms, end-to-end CRC-32). It publishes with confirms
// (Publish, PublishAsync, PublishBatch), consumes durable groups by push
// (Consume, Messages) or pull (Fetch), settles deliveries (Msg.Ack, Nack,
// Reject, InProgress) and manages topics and groups.
//
// It must never hand out data whose checksum does not match (a corrupt
// delivery is an error and is negatively acknowledged so that the broker
// redelivers it), never report a publish as confirmed before the server said
// so, and never drop an unconfirmed publish on reconnect: unconfirmed publishes
// are kept in a bounded buffer and sent again on the new connection, so a
// publish may be stored twice (at-least-once) but a confirmed one is never
// lost.
//
// Every blocking call takes a context.Context first and returns when it is
// done. A Conn is safe for concurrent use by many goroutines.
//
// Answers arrive in the order commands were sent (SPEC.md "strict answers"),
// so a Fetch that waits for messages holds back the answers to later commands
// on the same Conn; use a separate Conn for long polls next to latency
// sensitive publishing.
package fibril
