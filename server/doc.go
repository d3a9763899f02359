// Package server is Fibril's network layer: it accepts client connections
// (gnet event loops for plain TCP, a crypto/tls listener for TLS), speaks the
// NATS-compatible text protocol through package protocol, enforces limits,
// authentication and permissions, routes plain NATS traffic between
// subscribers itself, and binds durable verbs (confirmed publish, POLL, push
// SUB with a group, ACK/NACK/REJECT/EXTEND, TOPIC/GROUP) to the embeddable
// engine in server/broker.
//
// Threading: each connection is owned by one goroutine at a time for input
// (its gnet event loop, or its TLS reader goroutine). Output from any
// goroutine (broker callbacks, other connections' fan-out, the heartbeat
// ticker) is appended to the connection's bounded outbox and the owner is
// woken to write it, so the bytes of one connection leave in the order they
// were queued.
//
// Answers: every answered command reserves a slot in its connection's
// answer queue when it is parsed; slots are filled from any goroutine and
// written strictly in command order (SPEC.md "Strict answers"), so confirms
// from different partitions and long POLLs cannot reorder answers. Durable
// commands that must touch the disk (topic and group creation, management
// verbs, a publish waiting for room in a full topic) run on the
// connection's lane (lane.go), a goroutine that keeps their effects in
// command order too. A durable push SUB's deliveries wait in its answer
// slot until its +OK is written, so they never precede it.
//
// Files: server.go (lifecycle), options.go, conn_gnet.go and conn_tls.go
// (transports), conn_state.go (a connection's life: one state and its
// legal moves), client.go (a connection's parts, its outbox), answers.go
// (the answer queue and its lock, taken before client.mu), outbound.go
// (max_pending, the write deadline, slow consumers, settling on the
// socket), feed.go (parsing), handle_*.go (one verb family each), sublist.go (plain subject
// routing), auth.go (identities; what they may do is decided by package
// server/access on every path), authqueue.go and passwords.go (password
// checks: the bounded fair queue and the cache of recent answers, shared
// with the admin listener), outbuf.go (output memory: outbox chunks, what
// gnet is handed), heartbeat.go, lane.go, durable.go (engine binding),
// conns.go (connection listing and traffic counters), admin_listener.go
// (the HTTP admin listener of server/admin, on with Options.HTTPListen,
// with the same credentials as clients), stages.go (the network layer's
// part of the stage accounting of server/stagetime: each read a sample).
//
// The package must never block an event loop on disk, on another connection
// or on a slow consumer, never retain gnet's Peek slices past the callback
// that produced them, never let a connection's buffered input or output grow
// past its cap, and never log a secret (tokens, passwords, hashes).
//
// TLS: gnet has no TLS, so when Options.TLSListen is set the server runs a
// second listener with crypto/tls from the standard library, one reader and
// one writer goroutine per TLS connection, feeding the very same connection
// and protocol code as the gnet path.
package server
