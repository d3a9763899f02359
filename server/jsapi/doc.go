// Package jsapi serves the NATS JetStream API (SPEC.md 16.2) over the
// broker: `$JS.API.*` requests (account info, streams, consumers, pull
// requests) and `$JS.ACK.*` settle subjects, so programs written against the
// official JetStream clients run unchanged on Fibril.
//
// The mapping: a stream is a one-partition topic (a JetStream stream has one
// sequence); a pull consumer is a group of that topic (ack wait is the
// lease, max deliver the group's max deliveries); a delivery's reply subject
// is JetStream's ack subject, whose delivered count and stream sequence are
// the engine's attempt and offset. Stream and consumer settings the engine
// cannot honour are refused with JetStream's own error JSON, never ignored.
//
// What it owns: the JSON types (types.go), the error table (errors.go), the
// request handlers (api.go, stream.go, consumer.go, pull.go), the ack subject
// codec (ack.go) and the JetStream settings the engine does not keep
// (meta.go: one small file per stream and consumer under <data>/jetstream,
// written temp file, fsync, rename).
//
// It is bound to the engine through Engine and to the requesting connection
// through Requester; it must never touch sockets, never block its caller on
// a pull request (each waits on a goroutine of its own, bounded by
// MaxWaitingPulls), and never decide a request without the identity's
// permission check (package access, SPEC.md 6.1: the same rights as the
// matching TOPIC/GROUP verbs).
//
// Caveats: consumer sequences are counted in memory and restart from the
// stream sequence after a restart; push consumers, deliver policies
// last and last_per_subject, backoff, ack policies
// other than explicit and mirrors/sources are answered as not supported.
// Nats-Msg-Id de-duplication is the engine's (the stream's duplicate_window
// is its topic's duplicate_window_ms); the server adds "duplicate":true to
// the PubAck, and has the engine check Nats-Expected-Last-Msg-Id,
// -Last-Sequence, -Last-Subject-Sequence and -Stream
// (server/handle_expected.go, server/broker/expect.go).
package jsapi
