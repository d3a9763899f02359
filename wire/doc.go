// Package wire owns the byte formats that more than one layer of Fibril must
// agree on (SPEC.md sections 6, 9 and 12): subjects (validation,
// tokenising, wildcard matching, filter overlap and cover, the reserved "$"
// space), the ack handle "$F.<topic>.<group>.<partition>.<seq>.<attempt>",
// the NATS/1.0 header block, and the one schema of a topic's and of a
// group's configuration (TopicConfig and GroupConfig, SPEC.md 10.1 and
// 10.2). protocol (the parser and encoders), the broker (the engine), the
// server (routing, permissions) and the SDK all call these functions, so
// each rule is written once and holds everywhere.
//
// The package is a leaf: it must never import another package of this
// module, do I/O, start goroutines, read the clock, keep mutable global
// state, or allocate on success (every function here runs on the PUB/MSG
// hot path). It knows nothing of commands, connections, topics or errors
// codes: callers turn a Fault into their own error (protocol into an
// *Error with a code, the broker into ErrInvalid).
//
// Functions that take a Text accept a string or a []byte and return
// sub-slices of it; they keep no reference after they return.
package wire

// Text is a string or byte slice argument.
type Text interface{ ~string | ~[]byte }
