package server

// SPEC.md "Management": TOPIC CREATE|INFO|LIST|DELETE and GROUP
// CREATE|INFO|LIST|DELETE, answered `+OK <single-line json>` or -ERR. They
// touch the disk, so they run on the connection's lane (lane.go), in
// command order.

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/broker"
)

// handleManage runs one management verb. cmd's slices are copied first.
func (c *client) handleManage(cmd *protocol.Command) {
	op := cmd.Op
	name, group := string(cmd.Subject), string(cmd.Group)
	js := append([]byte(nil), cmd.JSON...)
	if name != "" && op != protocol.OpTopicList && !c.canManage(name) {
		c.reject(protocol.CodePermissionDenied, "for topic "+name)
		return
	}
	slot := c.reserve()
	b := c.srv.durable.b
	run := func() {
		v, err := manage(b, op, name, group, js)
		if err != nil {
			c.complete(slot, c.errAnswer(err))
			return
		}
		line, err := protocol.AppendOKJSON(nil, v)
		if err != nil {
			c.complete(slot, c.errLine(protocol.CodeInternal, err.Error()))
			return
		}
		c.complete(slot, line)
	}
	if !c.blocking(run) {
		c.laneFull(slot)
	}
}

// canManage: with permissions, managing a topic needs both publish and
// consume rights on its name.
func (c *client) canManage(topic string) bool {
	return c.perms == nil || (c.perms.Publish.allowed(topic) && c.perms.Consume.allowed(topic))
}

// manage performs one management verb and returns the JSON answer value.
func manage(b *broker.Broker, op protocol.Op, name, group string, js []byte) (any, error) {
	switch op {
	case protocol.OpTopicCreate:
		var wc protocol.TopicConfig
		if err := protocol.DecodeStrict(js, &wc); err != nil {
			return nil, err
		}
		if strings.HasPrefix(name, "$") {
			return nil, protocol.NewError(protocol.CodeReservedSubject, "topic "+name)
		}
		cfg := topicConfig(wc)
		t, err := b.CreateTopic(broker.TopicName(name), cfg)
		if errors.Is(err, broker.ErrTopicExists) {
			// SPEC.md section 10: the same configuration again is +OK.
			if old, ok := b.Topic(broker.TopicName(name)); ok {
				if want, rerr := cfg.Resolve(broker.TopicName(name)); rerr == nil && reflect.DeepEqual(want, old.Config()) {
					return topicInfo(old), nil
				}
			}
		}
		if err != nil {
			return nil, err
		}
		return topicInfo(t), nil
	case protocol.OpTopicInfo:
		t, ok := b.Topic(broker.TopicName(name))
		if !ok {
			return nil, protocol.NewError(protocol.CodeUnknownTopic, name)
		}
		return topicInfo(t), nil
	case protocol.OpTopicList:
		out := protocol.TopicList{Topics: []string{}}
		for _, t := range b.Topics() {
			out.Topics = append(out.Topics, string(t.Name()))
		}
		return out, nil
	case protocol.OpTopicDelete:
		if err := b.DeleteTopic(broker.TopicName(name)); err != nil {
			return nil, err
		}
		return protocol.Deleted{Topic: name}, nil
	}
	t, ok := b.Topic(broker.TopicName(name))
	if !ok {
		return nil, protocol.NewError(protocol.CodeUnknownTopic, name)
	}
	switch op {
	case protocol.OpGroupCreate:
		var wc protocol.GroupConfig
		if err := protocol.DecodeStrict(js, &wc); err != nil {
			return nil, err
		}
		cfg := groupConfig(wc)
		if old, exists := t.FindGroup(broker.GroupName(group)); exists {
			// SPEC.md section 10: the same configuration again is +OK.
			if want, err := cfg.Resolve(t.Name(), broker.GroupName(group)); err != nil || want != old.Config() {
				return nil, protocol.NewError(protocol.CodeGroupExists, name+"/"+group+" with a different configuration")
			}
			return groupInfoCurrent(old)
		}
		g, err := t.Group(broker.GroupName(group), cfg)
		if err != nil {
			return nil, err
		}
		return groupInfoCurrent(g)
	case protocol.OpGroupInfo:
		g, ok := t.FindGroup(broker.GroupName(group))
		if !ok {
			return nil, protocol.NewError(protocol.CodeUnknownGroup, name+"/"+group)
		}
		return groupInfoCurrent(g)
	case protocol.OpGroupList:
		out := protocol.GroupList{Topic: name, Groups: []string{}}
		for _, g := range t.Groups() {
			out.Groups = append(out.Groups, string(g.Name()))
		}
		return out, nil
	case protocol.OpGroupDelete:
		if err := t.DeleteGroup(broker.GroupName(group)); err != nil {
			return nil, err
		}
		return protocol.Deleted{Topic: name, Group: group}, nil
	}
	return nil, protocol.NewError(protocol.CodeUnknownOp, op.String())
}

func topicConfig(w protocol.TopicConfig) broker.TopicConfig {
	return broker.TopicConfig{
		Subjects: w.Subjects, Partitions: w.Partitions,
		Durability: broker.Durability(w.Durability), Retention: broker.Retention(w.Retention),
		MaxAgeMs: w.MaxAgeMillis, MaxBytes: w.MaxBytes, MaxMsgs: w.MaxMsgs,
		MaxUnsettledMsgs: w.MaxUnsettledMsgs, MaxUnsettledBytes: w.MaxUnsettledBytes,
		FullPolicy: broker.FullPolicy(w.FullPolicy), Compression: broker.Compression(w.Compression),
	}
}

func groupConfig(w protocol.GroupConfig) broker.GroupConfig {
	return broker.GroupConfig{
		Start:         broker.Start(w.Start),
		LeaseMs:       w.LeaseMillis,
		MaxDeliveries: w.MaxDeliveries,
		DeadLetter:    w.DeadLetter,
		NATSAck:       broker.NATSAck(w.NATSAck),
	}
}

func topicInfo(t *broker.Topic) protocol.TopicInfo {
	in := t.Info()
	c := in.Config
	out := protocol.TopicInfo{
		Name: string(in.Name), ID: uint64(in.ID),
		Config: protocol.TopicConfig{
			Subjects: c.Subjects, Partitions: c.Partitions,
			Durability: string(c.Durability), Retention: string(c.Retention),
			MaxAgeMillis: c.MaxAgeMs, MaxBytes: c.MaxBytes, MaxMsgs: c.MaxMsgs,
			MaxUnsettledMsgs: c.MaxUnsettledMsgs, MaxUnsettledBytes: c.MaxUnsettledBytes,
			FullPolicy: string(c.FullPolicy), Compression: string(c.Compression),
		},
		Msgs: uint64(max(in.Messages, 0)), Bytes: uint64(max(in.Bytes, 0)),
		Groups: []string{},
	}
	for i, p := range in.Partitions {
		pi := protocol.PartitionInfo{Partition: uint32(i), FirstSeq: uint64(p.FirstSeq), LastSeq: uint64(p.LastSeq)}
		if p.LastSeq == 0 {
			pi.FirstSeq = 0 // never written: SPEC.md shows 0/0
		}
		if p.LastSeq >= p.FirstSeq && p.LastSeq > 0 {
			pi.Msgs = uint64(p.LastSeq - p.FirstSeq + 1)
		}
		out.Partitions = append(out.Partitions, pi)
	}
	for _, g := range in.Groups {
		out.Groups = append(out.Groups, string(g))
	}
	return out
}

// groupInfoTimeout bounds GROUP INFO's wait for the partition actors.
const groupInfoTimeout = 5 * time.Second

// groupInfoCurrent describes g with every answered delivery and settle
// counted (SPEC.md 10.2): it waits for g's partition actors (on the lane).
func groupInfoCurrent(g *broker.Group) (protocol.GroupInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), groupInfoTimeout)
	defer cancel()
	in, err := g.InfoCurrent(ctx)
	if err != nil {
		return protocol.GroupInfo{}, err
	}
	return groupInfo(in), nil
}

// groupInfo maps the engine's description onto the wire's.
func groupInfo(in broker.GroupInfo) protocol.GroupInfo {
	c := in.Config
	if c.NATSAck == "" {
		c.NATSAck = broker.NATSAckAuto
	}
	out := protocol.GroupInfo{
		Topic: string(in.Topic), Name: string(in.Name), ID: uint64(in.ID),
		Config: protocol.GroupConfig{
			Start: string(c.Start), LeaseMillis: c.LeaseMs,
			MaxDeliveries: c.MaxDeliveries, DeadLetter: c.DeadLetter, NATSAck: string(c.NATSAck),
		},
		Pending:      uint64(max(in.Ready, 0)),
		Inflight:     uint64(max(in.Inflight, 0)),
		Redelivered:  in.Redelivered,
		DeadLettered: in.DeadLettered,
		Partitions:   []protocol.GroupPartitionInfo{},
	}
	for _, p := range in.Partitions {
		out.Partitions = append(out.Partitions, protocol.GroupPartitionInfo{
			Partition:  uint32(p.Partition),
			AckFloor:   uint64(max(p.Frontier, 1) - 1),
			Delivered:  uint64(max(p.Next, 1) - 1),
			DamagedSeq: uint64(p.DamagedSeq), DamagedError: p.DamagedError,
		})
	}
	return out
}
