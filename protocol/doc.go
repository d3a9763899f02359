// Package protocol owns the Fibril wire protocol (SPEC.md): bytes in, typed
// commands out, and back. It holds the streaming Parser, the append-style
// encoders (AppendPub, AppendMsg, AppendOK, AppendError, ...), the ack Handle
// format, the INFO/CONNECT and management JSON types, and the error table
// generated from errors.json. The server, the Go SDK and the conformance
// harness all use it, so both directions (client→server and server→client)
// are here.
//
// The package is pure: it must never do I/O, start goroutines, touch the
// file system, read the clock or keep global mutable state, and it must
// never allocate per frame on the PUB/MSG hot path. It knows nothing of
// topics, groups or connections beyond their wire form.
package protocol
