package broker

import (
	"errors"
	"fmt"

	"github.com/fibrilmq/fibril/server/seglog"
)

// Sentinel errors. Callers test them with errors.Is; the broker wraps them
// with context.
var (
	// ErrClosed: the broker (or the topic) is closed or closing.
	ErrClosed = errors.New("broker: closed")
	// ErrQueueFull: a partition's command ring is full; retry later. Returned
	// at once by the Async methods, never after blocking.
	ErrQueueFull = errors.New("broker: partition queue full")
	// ErrTopicFull: the topic's max_unsettled_msgs/bytes limit is reached and
	// its full_policy is reject (or the caller cannot wait).
	ErrTopicFull = errors.New("broker: topic full")
	// ErrDiskFull: a log found no room on its disk (ENOSPC, wrapped too);
	// nothing was stored. Retriable: writing resumes as soon as the disk
	// has room for what is written (Broker.DiskFull).
	ErrDiskFull = errors.New("broker: disk full")
	// ErrTooManyFiles: the process reached its open-files limit (EMFILE,
	// ENFILE, wrapped too) while opening a log or a segment; nothing was
	// created or stored. Retriable: it works again once files are closed
	// or the limit is raised (Broker.FileLimitErrors counts them).
	ErrTooManyFiles = errors.New("broker: too many open files")
	// ErrTopicExists: a topic with that name already exists.
	ErrTopicExists = errors.New("broker: topic exists")
	// ErrNoTopic: no topic with that name or id.
	ErrNoTopic = errors.New("broker: no such topic")
	// ErrNoGroup: no group with that name or id.
	ErrNoGroup = errors.New("broker: no such group")
	// ErrOverlap: the topic's subject filters overlap another topic's.
	ErrOverlap = errors.New("broker: subject filters overlap another topic")
	// ErrInvalid: a bad name, subject, config value or argument.
	ErrInvalid = errors.New("broker: invalid argument")
	// ErrInvalidHeader: a publish's header the broker reads (Nats-TTL) has
	// a value it cannot take, or one the topic does not allow.
	ErrInvalidHeader = errors.New("broker: invalid header value")
	// ErrMsgIDTooLong: a publish's message id (wire.HeaderMsgID) is longer
	// than wire.MaxMsgIDLen. It wraps ErrInvalid.
	ErrMsgIDTooLong = fmt.Errorf("%w: message id too long", ErrInvalid)
	// ErrWrongLastMsgID: a publish's Message.ExpectLastMsgID is not the
	// message id of the last message stored in its partition; nothing is
	// stored. The error is a *LastMsgIDError naming the id.
	ErrWrongLastMsgID = errors.New("broker: wrong last msg ID")
	// ErrUnknownHandle: the handle names no known topic, group, partition or
	// delivered message.
	ErrUnknownHandle = errors.New("broker: unknown handle")
	// ErrStaleHandle: the handle's attempt is not the message's current
	// delivery count (it was redelivered since).
	ErrStaleHandle = errors.New("broker: stale handle")
	// ErrNotInflight: extend of a delivery whose lease already ended.
	ErrNotInflight = errors.New("broker: delivery not in flight")
	// ErrCRCMismatch: Message.CRC does not match the header and data.
	ErrCRCMismatch = errors.New("broker: crc mismatch")
	// ErrTooLarge: the message (or its subject) does not fit in one record
	// of the data log.
	ErrTooLarge = errors.New("broker: message too large")
)

// LastMsgIDError is the ErrWrongLastMsgID of one publish: Last is the
// message id of the last message stored in the partition ("" when it had
// none).
type LastMsgIDError struct{ Last string }

func (e *LastMsgIDError) Error() string { return "broker: wrong last msg ID: " + e.Last }

// Is makes errors.Is(err, ErrWrongLastMsgID) hold.
func (e *LastMsgIDError) Is(target error) bool { return target == ErrWrongLastMsgID }

// ErrNotHolder: a settle (SettleOp.As) names a principal other than the
// one the delivery was made to.
var ErrNotHolder = errors.New("broker: delivery belongs to another principal")

// ErrCorruptState: a snapshot or event record of consumer state cannot be
// decoded. Open refuses to start rather than guess.
var ErrCorruptState = errors.New("broker: corrupt consumer state")

// IsDamage reports whether err is a refusal because stored data is damaged
// or missing (a segment, an index, an event record, a snapshot, the
// catalog): the operator's `fibril verify` and `fibril repair` case, as
// opposed to an I/O or configuration failure.
func IsDamage(err error) bool {
	return errors.Is(err, seglog.ErrCorrupt) || errors.Is(err, ErrCorruptState) || errors.Is(err, ErrCorruptCatalog)
}
