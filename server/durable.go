package server

// Durable bindings (SPEC.md "Durable topics"): the server side of the
// engine in server/broker. Broker callbacks run on partition actors; they
// only encode a frame and hand it to the connection's outbox or answer slot.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/server/cluster"
	"github.com/fibrilmq/fibril/server/clusternode"
	"github.com/fibrilmq/fibril/server/metacat"
	"github.com/fibrilmq/fibril/server/stagetime"
)

type durableEngine = *durableBinding

// durableBinding holds the engine.
type durableBinding struct {
	b      *broker.Broker
	stages *stagetime.Recorder // the stage accounting, engine and network (stages.go)
}

// durableSub is the push side of a SUB bound to a durable group.
type durableSub interface{ stop() }

// openDurable opens the engine in DataDir unless NoBroker is set.
func (s *Server) openDurable() error {
	if s.opts.NoBroker {
		return nil
	}
	bo := s.opts.Engine
	log := s.log.With("part", "broker")
	bo.Logf = func(format string, args ...any) {
		// The engine marks what needs an operator (damaged data) ERROR.
		if msg := fmt.Sprintf(format, args...); strings.HasPrefix(msg, "ERROR ") {
			log.Error(strings.TrimPrefix(msg, "ERROR "))
		} else {
			log.Warn(strings.TrimPrefix(msg, "WARN "))
		}
	}
	stages := bo.Stages // an embedder's (tests sample every command)
	if stages == nil {
		stages = stagetime.NewRecorder(stagetime.DefaultGap)
		bo.Stages = stages
	}
	var b *broker.Broker
	var err error
	if s.opts.Cluster != nil {
		var n *clusternode.Node
		n, err = s.openClusterNode(clusternode.Config{Engine: bo, Logf: bo.Logf})
		if n != nil {
			b = n.Broker()
		}
	} else {
		b, err = broker.Open(s.opts.DataDir, bo)
	}
	if err != nil {
		return fmt.Errorf("server: open durable engine in %s: %w", s.opts.DataDir, err)
	}
	s.durable = &durableBinding{b: b, stages: stages}
	if err := s.openJetStream(); err != nil {
		s.durable = nil
		s.closeEngine(b)
		return fmt.Errorf("server: open the JetStream API: %w", err)
	}
	return nil
}

func (s *Server) closeDurable() {
	s.engine.Store(nil)
	if s.durable == nil {
		return
	}
	if s.js != nil {
		s.js.Close()
	}
	s.closeEngine(s.durable.b)
}

// closeEngine closes b, or the cluster node b runs in.
func (s *Server) closeEngine(b *broker.Broker) {
	var err error
	if s.cluster != nil {
		s.cluster.interest.close()
		s.forwards.Close()
		err = s.cluster.node.Close()
	} else {
		err = b.Close()
	}
	if err != nil {
		s.log.Error("closing durable engine", "err", err)
	}
}

// releaseDurable gives a closed connection's leases back at once.
func (s *Server) releaseDurable(c *client) {
	if s.durable != nil {
		s.durable.b.ReleaseOwner(c.owner())
	}
	s.forwardClosed(c)
}

// owner is this connection's lease owner id in the engine.
func (c *client) owner() broker.OwnerID { return broker.OwnerID(c.id) }

// codeOf maps an engine error onto the error table.
func codeOf(err error) protocol.Code {
	var pe *protocol.Error
	switch {
	case errors.As(err, &pe):
		return pe.Code
	case errors.Is(err, broker.ErrQueueFull):
		return protocol.CodeQueueFull
	case errors.Is(err, broker.ErrTooLarge):
		// Within max_payload but over what one record of the topic's log
		// holds: the frame was read whole, so the connection stays up.
		return protocol.CodeMaxPayload
	case errors.Is(err, broker.ErrTopicFull):
		return protocol.CodeTopicFull
	case errors.Is(err, broker.ErrDiskFull):
		return protocol.CodeDiskFull
	case errors.Is(err, broker.ErrTooManyFiles):
		return protocol.CodeTooManyFiles
	case errors.Is(err, broker.ErrClosed):
		return protocol.CodeShuttingDown
	case errors.Is(err, broker.ErrNotLeader),
		// The cluster's catalog: no leader yet, one changing, no quorum in
		// time (outcome unknown), the node starting: retriable.
		errors.Is(err, cluster.ErrNotLeader), errors.Is(err, cluster.ErrLeaderChanged),
		errors.Is(err, metacat.ErrNotReady), errors.Is(err, metacat.ErrTimeout):
		return protocol.CodeNotLeader
	case errors.Is(err, metacat.ErrBusy), errors.Is(err, cluster.ErrBusy):
		return protocol.CodeQueueFull
	case errors.Is(err, broker.ErrTopicExists):
		return protocol.CodeTopicExists
	case errors.Is(err, broker.ErrNoTopic):
		return protocol.CodeUnknownTopic
	case errors.Is(err, broker.ErrNoGroup):
		return protocol.CodeUnknownGroup
	case errors.Is(err, broker.ErrOverlap):
		return protocol.CodeTopicOverlap
	case errors.Is(err, broker.ErrUnknownHandle):
		return protocol.CodeUnknownHandle
	case errors.Is(err, broker.ErrStaleHandle), errors.Is(err, broker.ErrNotInflight):
		return protocol.CodeStaleHandle
	case errors.Is(err, broker.ErrNotHolder):
		return protocol.CodePermissionDenied
	case errors.Is(err, broker.ErrCRCMismatch):
		return protocol.CodeCRCMismatch
	case errors.Is(err, broker.ErrMsgIDTooLong):
		return protocol.CodeInvalidHeader
	case errors.Is(err, broker.ErrWrongLastMsgID), errors.Is(err, broker.ErrWrongLastSeq),
		errors.Is(err, broker.ErrStreamMismatch), errors.Is(err, broker.ErrSubjectUnknown):
		return protocol.CodeExpectedMismatch // handle_expected.go
	case errors.Is(err, broker.ErrInvalid):
		return protocol.CodeInvalidConfig
	case errors.Is(err, broker.ErrInvalidHeader):
		return protocol.CodeInvalidHeader
	}
	return protocol.CodeInternal
}

// errAnswer encodes err for this connection; the detail is the engine's
// message, which names topics and numbers, never secrets. A table error
// gives its own detail only: its code and text are the line's already.
func (c *client) errAnswer(err error) []byte {
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Err == nil && pe == err {
		return c.errLine(pe.Code, pe.Detail) // the code and text once
	}
	return c.errLine(codeOf(err), err.Error())
}

// toBrokerHandle converts a wire handle; ok is false when a field does not
// fit the engine's ranges (then no such handle can exist).
func toBrokerHandle(h protocol.Handle) (broker.Handle, bool) {
	if h.Topic > uint64(^broker.TopicID(0)) || h.Group > uint64(^broker.GroupID(0)) {
		return broker.Handle{}, false
	}
	return broker.Handle{
		Topic: broker.TopicID(h.Topic), Group: broker.GroupID(h.Group),
		Partition: broker.Partition(h.Partition), Seq: broker.Seq(h.Seq), Attempt: h.Attempt,
	}, true
}

func toWireHandle(h broker.Handle) protocol.Handle {
	return protocol.Handle{
		Topic: uint64(h.Topic), Group: uint64(h.Group),
		Partition: uint32(h.Partition), Seq: uint64(h.Seq), Attempt: h.Attempt,
	}
}

// appendDelivery encodes one durable delivery as MSG/HMSG with the ack
// handle in the reply-to slot.
func appendDelivery(dst []byte, d *broker.Delivery, sid string, crc, headers bool) []byte {
	var hb [protocol.MaxHandleLen]byte
	handle := toWireHandle(d.Handle).Append(hb[:0])
	tok := protocol.NoCRC
	if len(d.Header) > 0 && headers {
		if crc {
			tok = protocol.KnownCRC(d.CRC)
		}
		return protocol.AppendHMsg(dst, d.Subject, sid, handle, d.Header, d.Data, tok)
	}
	if crc {
		if len(d.Header) > 0 {
			tok = protocol.ComputeCRC // headers stripped: checksum the payload alone
		} else {
			tok = protocol.KnownCRC(d.CRC)
		}
	}
	return protocol.AppendMsg(dst, d.Subject, sid, handle, d.Data, tok)
}

// autoCreatable reports whether a PUB to subject may create a topic: one
// of Options.AutoCreate matches it (and it is no inbox nor `$` subject).
func (s *Server) autoCreatable(subject string) bool {
	if len(s.opts.AutoCreate) == 0 || !protocol.AutoCreatable([]byte(subject)) || !validSubject(subject) {
		return false
	}
	for _, f := range s.opts.AutoCreate {
		if protocol.MatchSubject([]byte(f), []byte(subject)) {
			return true
		}
	}
	return false
}

// autoTopicConfig is what an auto-created topic gets: conservative limits,
// oldest messages discarded first.
func autoTopicConfig() broker.TopicConfig {
	return broker.TopicConfig{
		Retention: broker.RetentionLimits,
		MaxBytes:  1 << 30,
		MaxAgeMs:  7 * 24 * 3600 * 1000,
	}
}
