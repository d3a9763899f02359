// Package transport carries raft messages between the nodes of a
// cluster over TCP with mutual TLS, for many raft groups at once: each
// frame names the group its message belongs to.
//
// # What it owns
//
//   - Links (transport.go, peer.go): for each peer one outbound
//     connection, dialled by one sender goroutine that drains the peer's
//     bounded queue; for each peer at most one inbound connection (a new
//     one from the same peer replaces the old), read by one goroutine
//     that hands each message to Options.Handler. Two nodes so talk over
//     two connections, one each way.
//   - Identity (tls.go): every link is TLS 1.3 with certificates from the
//     cluster's CA on both ends. A dialler checks that the server's
//     certificate names the peer it meant; a listener maps the client's
//     certificate to a known peer by name and cuts a connection whose
//     messages claim another sender.
//   - Frames (frame.go): a 4-byte big-endian length, an 8-byte group ID,
//     then a raftpb.Message in protobuf. A frame over Options.MaxFrame is
//     refused: not sent (counted as Oversize) or, received, the
//     connection is cut (BadFrames).
//   - Snapshot transfers (snapshot.go): a MsgSnap over MaxFrame is sent
//     as chunk frames (the group ID's top bit set, at most ChunkSize of
//     the message each, with the transfer's number, length, offset and
//     CRC-32), one transfer per peer at a time, at most MaxSnapshot
//     bytes, within SnapshotTimeout; the receiver writes them into a
//     temporary file in SnapshotDir and hands the message on once it is
//     whole and its checksum matches. A chunk out of order, a transfer
//     too large or too slow cuts the connection and drops the file.
//     Every MsgSnap's outcome (written, or dropped) goes to
//     Options.OnSnapshot, so raft can send another after a failure.
//   - Fetches (fetch.go): a stream a node pulls from a peer for one
//     group (a replica restoring its logs from another's), each on a
//     connection of its own with the same mutual TLS, told apart from
//     a raft link by ALPN: one request frame, then chunks of at most
//     ChunkSize, each with its CRC-32, checked on arrival (a bad one
//     fails the stream: ErrBadChunk), ended by an end or error chunk.
//     Options.OnFetch writes the stream; Fetch reads it. At most
//     MaxFetches are served and as many made at once (ErrFetchBusy),
//     each within FetchTimeout and MaxFetchBytes.
//
// # What it must never do
//
//   - Block the caller of Send: a full queue drops the message (counted
//     as DroppedFull) and raft retransmits what matters. While a peer
//     cannot be reached, what was queued for it is dropped (Unreachable)
//     rather than delivered stale later.
//   - Accept a raft message from a connection without a certificate of the
//     cluster's CA naming a known peer, or one whose From is not that peer.
//   - Serve or make more than Options.MaxFetches fetches at once, or
//     pass a fetch chunk to its reader before its CRC is checked.
//   - Hold more than Options.MaxInbound accepted connections, queue more
//     than Options.QueueLen messages per peer, or read a frame it has not
//     checked against the maximum.
//
// # Caveats
//
//   - Delivery is at most once and in order per connection; raft
//     tolerates loss, so nothing is acknowledged or resent here.
//   - Reconnects back off from MinBackoff, doubling to MaxBackoff; each
//     failed dial or link is reported to Options.OnUnreachable.
//   - A chunked snapshot is marshalled whole on the sender (a copy of
//     raft's snapshot, one per peer at a time) and read back whole on the
//     receiver, so MaxSnapshot bounds the memory a transfer takes on
//     each side; the chunks bound only what one frame holds. Its delivery
//     is not acknowledged here: raft's next append answer tells.
//   - Group IDs must stay below 1<<63 (the chunk mark).
package transport
