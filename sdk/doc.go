// Package fibril is the Go client for the Fibril message broker.
//
// It owns one thing: speaking the Fibril wire protocol (SPEC.md) over one TCP
// or TLS connection at a time, to one server of a list (see "Several servers
// and failover"), on behalf of an application, in fibril mode (strict
// answers, publish confirms, end-to-end CRC-32), built on the protocol
// package's parser, encoders and error table.
//
//	c, err := fibril.Connect(ctx, "fibril://127.0.0.1:4222", fibril.WithName("worker"))
//	pos, err := c.Publish(ctx, "orders", data, fibril.WithKey("customer-7"))   // waits for the confirm
//	f, err := c.PublishAsync(ctx, "orders", data)                              // pipelined; f.Wait(ctx)
//	msgs, err := c.Fetch(ctx, "orders", "billing", 10, time.Second)            // POLL
//	fe, err := c.NewFetcher("orders", "billing", 500, time.Second)             // POLLs prefetched; fe.Next(ctx)
//	err = c.Consume(ctx, "orders", "billing", handler, fibril.WithConcurrency(4)) // push, blocks until ctx ends
//	for m, err := range c.Messages(ctx, "orders", "billing") { ... }            // push, as an iterator
//	err = m.Ack(ctx) // or m.Nack(ctx, delay), m.Reject(ctx), m.InProgress(ctx)
//	a := c.AckAllAsync(msgs...)                                                // pipelined; a.Wait(ctx)
//
// # Consuming
//
// An ACK is answered once the server has committed it (under the group
// commit, an fsync shared with publishes), and answers come in command
// order, so a loop of Fetch then AckAll pays two round trips and a commit
// per batch. The fast forms hide both:
//
//   - Pull: a Fetcher keeps POLLs in flight (WithPrefetch, default 2) while
//     the application handles a batch, and AckAllAsync (or Msg.AckAsync)
//     writes the ACK without waiting; check the AckFuture later. Prefetched
//     deliveries are leased while they wait in the client (WithPrefetch
//     says how to stay within lease_ms); Fetcher.Close hands them back.
//   - Push: Consume pipelines and batches its acks by itself; with
//     Messages or Subscription.Next, settle with AckAsync to do the same
//     (acks made in a burst share one ACK command).
//
// Fetch, Ack and AckAll keep their meaning: they return once the server
// answered. A delivery's payload, header block and handle are copied once
// out of the read buffer into blocks shared with neighbouring deliveries
// (see Msg), so a delivery without headers costs no allocation of its own.
//
// Errors: every -ERR from the server is an *Error (the protocol package's
// type) whose Code comes from SPEC.md's error table; test it with errors.Is
// against the per-code sentinels (ErrStaleHandle, ErrTopicFull, ...), never
// by its text. Client-side conditions have their own sentinels (ErrClosed,
// ErrConnectionLost, ErrCorruptDelivery, ...).
//
// It must never hand out data whose checksum does not match (a corrupt
// delivery is an error and is negatively acknowledged so that the broker
// redelivers it), never report a publish as confirmed before the server said
// so, and never drop an unconfirmed publish on reconnect: unconfirmed publishes
// are kept in a bounded buffer and sent again on the new connection, so a
// publish may be stored twice (at-least-once) but a confirmed one is never
// lost. Polls, settles and management requests that were on the wire when
// the connection dropped fail with ErrConnectionLost instead (their effect is
// unknown); push subscriptions are renewed on the new connection.
//
// # Several servers and failover
//
// Connect takes a comma-separated list of URLs ("nats://a:4222,nats://b:4222")
// and WithServers adds more; each URL keeps its own scheme (tls:// turns
// TLS on for that server) and credentials. Connect tries them in order and
// returns the first that completes the handshake, or an error wrapping
// ErrNoServers that names each address tried and why it failed. Each INFO's
// connect_urls (the client addresses of a cluster's nodes) join the end of
// the list, once each and at most 64 servers in all, with the scheme and
// credentials of the server that sent them, so a Conn given one node finds
// the others; WithoutDiscovery keeps the list to the servers given, and
// Conn.Servers returns it. On a lost connection the Conn tries the next
// server of the list, wrapping around; the ReconnectPolicy delay grows once
// per full pass over the list, not per server, and the move is logged
// ("fibril: reconnected", with the new and the old address).
//
// What is promised across a failover: a publish is reported confirmed only
// once a server confirmed it, and is stored at least once. Publishes not
// confirmed when the connection dropped are resent to the next server
// before any publish made since, in the order first sent (each may have
// been stored already, so it may be stored twice); give a publish an id
// (WithMsgID) and a cluster stores it once within the topic's duplicate
// window, the resend confirmed as Duplicate with the first one's Position.
// Independent servers (not a cluster) share nothing: a resend to another
// server is a new message there. A publish answered not_leader (a cluster
// is electing its partition's leader) is resent on the same connection
// after a short backoff until it is confirmed or its context ends (see
// Publish). A delivery not settled before the loss comes again after its
// lease; in a cluster, a settle answered before the loss stays settled on
// the new leader.
//
// Every blocking call takes a context.Context first and returns when it is
// done. A Conn is safe for concurrent use by many goroutines.
//
// Answers arrive in the order commands were sent (SPEC.md "strict answers"),
// so a Fetch that waits for messages holds back the answers to later commands
// on the same Conn; use a separate Conn for long polls next to latency
// sensitive publishing.
package fibril
