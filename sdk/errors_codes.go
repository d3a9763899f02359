package fibril

import "github.com/fibrilmq/fibril/protocol"

// Per-code sentinels of SPEC.md's error table (protocol/errors.json), for
// errors.Is. Every -ERR the server sends matches exactly one of them.
var (
	// ErrUnknownOp matches -ERR with code unknown_op.
	ErrUnknownOp = protocol.ErrUnknownOp
	// ErrMaxControlLine matches -ERR with code max_control_line.
	ErrMaxControlLine = protocol.ErrMaxControlLine
	// ErrMaxPayload matches -ERR with code max_payload.
	ErrMaxPayload = protocol.ErrMaxPayload
	// ErrBadFrame matches -ERR with code bad_frame.
	ErrBadFrame = protocol.ErrBadFrame
	// ErrInvalidArgs matches -ERR with code invalid_args.
	ErrInvalidArgs = protocol.ErrInvalidArgs
	// ErrInvalidNumber matches -ERR with code invalid_number.
	ErrInvalidNumber = protocol.ErrInvalidNumber
	// ErrNumberOverflow matches -ERR with code number_overflow.
	ErrNumberOverflow = protocol.ErrNumberOverflow
	// ErrInvalidSubject matches -ERR with code invalid_subject.
	ErrInvalidSubject = protocol.ErrInvalidSubject
	// ErrWildcardNotAllowed matches -ERR with code wildcard_not_allowed.
	ErrWildcardNotAllowed = protocol.ErrWildcardNotAllowed
	// ErrInvalidName matches -ERR with code invalid_name.
	ErrInvalidName = protocol.ErrInvalidName
	// ErrInvalidCRCToken matches -ERR with code invalid_crc_token.
	ErrInvalidCRCToken = protocol.ErrInvalidCRCToken
	// ErrCRCMismatch matches -ERR with code crc_mismatch.
	ErrCRCMismatch = protocol.ErrCRCMismatch
	// ErrInvalidHeader matches -ERR with code invalid_header.
	ErrInvalidHeader = protocol.ErrInvalidHeader
	// ErrInvalidHandle matches -ERR with code invalid_handle.
	ErrInvalidHandle = protocol.ErrInvalidHandle
	// ErrInvalidConnect matches -ERR with code invalid_connect.
	ErrInvalidConnect = protocol.ErrInvalidConnect
	// ErrInvalidJSON matches -ERR with code invalid_json.
	ErrInvalidJSON = protocol.ErrInvalidJSON
	// ErrFibrilRequired matches -ERR with code fibril_required.
	ErrFibrilRequired = protocol.ErrFibrilRequired
	// ErrAuthViolation matches -ERR with code auth_violation.
	ErrAuthViolation = protocol.ErrAuthViolation
	// ErrAuthTimeout matches -ERR with code auth_timeout.
	ErrAuthTimeout = protocol.ErrAuthTimeout
	// ErrAuthBusy matches -ERR with code auth_busy.
	ErrAuthBusy = protocol.ErrAuthBusy
	// ErrPermissionDenied matches -ERR with code permission_denied.
	ErrPermissionDenied = protocol.ErrPermissionDenied
	// ErrReservedSubject matches -ERR with code reserved_subject.
	ErrReservedSubject = protocol.ErrReservedSubject
	// ErrStaleConnection matches -ERR with code stale_connection.
	ErrStaleConnection = protocol.ErrStaleConnection
	// ErrSlowConsumer matches -ERR with code slow_consumer.
	ErrSlowConsumer = protocol.ErrSlowConsumer
	// ErrMaxConnections matches -ERR with code max_connections.
	ErrMaxConnections = protocol.ErrMaxConnections
	// ErrMaxSubscriptions matches -ERR with code max_subscriptions.
	ErrMaxSubscriptions = protocol.ErrMaxSubscriptions
	// ErrDuplicateSID matches -ERR with code duplicate_sid.
	ErrDuplicateSID = protocol.ErrDuplicateSID
	// ErrMaxUnconfirmed matches -ERR with code max_unconfirmed.
	ErrMaxUnconfirmed = protocol.ErrMaxUnconfirmed
	// ErrQueueFull matches -ERR with code queue_full.
	ErrQueueFull = protocol.ErrQueueFull
	// ErrTopicFull matches -ERR with code topic_full.
	ErrTopicFull = protocol.ErrTopicFull
	// ErrUnknownTopic matches -ERR with code unknown_topic.
	ErrUnknownTopic = protocol.ErrUnknownTopic
	// ErrUnknownGroup matches -ERR with code unknown_group.
	ErrUnknownGroup = protocol.ErrUnknownGroup
	// ErrTopicExists matches -ERR with code topic_exists.
	ErrTopicExists = protocol.ErrTopicExists
	// ErrGroupExists matches -ERR with code group_exists.
	ErrGroupExists = protocol.ErrGroupExists
	// ErrTopicOverlap matches -ERR with code topic_overlap.
	ErrTopicOverlap = protocol.ErrTopicOverlap
	// ErrInvalidConfig matches -ERR with code invalid_config.
	ErrInvalidConfig = protocol.ErrInvalidConfig
	// ErrUnknownHandle matches -ERR with code unknown_handle.
	ErrUnknownHandle = protocol.ErrUnknownHandle
	// ErrStaleHandle matches -ERR with code stale_handle.
	ErrStaleHandle = protocol.ErrStaleHandle
	// ErrInvalidAck matches -ERR with code invalid_ack.
	ErrInvalidAck = protocol.ErrInvalidAck
	// ErrDiskFull matches -ERR with code disk_full.
	ErrDiskFull = protocol.ErrDiskFull
	// ErrTooManyFiles matches -ERR with code too_many_files.
	ErrTooManyFiles = protocol.ErrTooManyFiles
	// ErrInternal matches -ERR with code internal.
	ErrInternal = protocol.ErrInternal
	// ErrShuttingDown matches -ERR with code shutting_down.
	ErrShuttingDown = protocol.ErrShuttingDown
	// ErrNotLeader matches -ERR with code not_leader: in a cluster, another
	// node serves the partition now (retriable).
	ErrNotLeader = protocol.ErrNotLeader
	// ErrExpectedMismatch matches -ERR with code expected_mismatch: a
	// publish's Nats-Expected-* condition did not hold; nothing stored.
	ErrExpectedMismatch = protocol.ErrExpectedMismatch
)

// codeSentinels lists the sentinels above, for tests that check every code
// of the table has one.
func codeSentinels() []*Error {
	return []*Error{ErrUnknownOp, ErrMaxControlLine, ErrMaxPayload, ErrBadFrame, ErrInvalidArgs, ErrInvalidNumber, ErrNumberOverflow, ErrInvalidSubject, ErrWildcardNotAllowed, ErrInvalidName, ErrInvalidCRCToken, ErrCRCMismatch, ErrInvalidHeader, ErrInvalidHandle, ErrInvalidConnect, ErrInvalidJSON, ErrFibrilRequired, ErrAuthViolation, ErrAuthTimeout, ErrAuthBusy, ErrPermissionDenied, ErrReservedSubject, ErrStaleConnection, ErrSlowConsumer, ErrMaxConnections, ErrMaxSubscriptions, ErrDuplicateSID, ErrMaxUnconfirmed, ErrQueueFull, ErrTopicFull, ErrUnknownTopic, ErrUnknownGroup, ErrTopicExists, ErrGroupExists, ErrTopicOverlap, ErrInvalidConfig, ErrUnknownHandle, ErrStaleHandle, ErrInvalidAck, ErrDiskFull, ErrTooManyFiles, ErrInternal, ErrShuttingDown, ErrNotLeader, ErrExpectedMismatch}
}
