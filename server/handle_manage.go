package server

// SPEC.md "Management": TOPIC CREATE|INFO|LIST|DELETE and GROUP
// CREATE|INFO|LIST|DELETE, answered `+OK <single-line json>` or -ERR. They
// touch the disk, so they run on the connection's lane (lane.go), in
// command order. Who may do what is SPEC.md 6.1, decided by package
// access: each verb checks the name before looking it up (so a refusal
// never tells whether a topic exists), then the topic as found.

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/access"
	"github.com/fibrilmq/fibril/server/broker"
)

// handleManage runs one management verb. cmd's slices are copied first.
func (c *client) handleManage(cmd *protocol.Command) {
	op := cmd.Op
	name, group := string(cmd.Subject), string(cmd.Group)
	js := append([]byte(nil), cmd.JSON...)
	slot := c.reserve()
	b := c.srv.durable.b
	id := c.login.perms
	run := func() {
		if c.srv.cluster != nil && catalogMissing(b, op, name, group) {
			c.srv.catalogCaughtUp() // made on another node a moment ago?
		}
		if op == protocol.OpGroupInfo && c.forwardGroupInfo(name, group, slot) {
			return
		}
		v, err := manage(b, id, op, name, group, js)
		if err != nil {
			c.complete(slot, c.errAnswer(err))
			return
		}
		if ti, ok := v.(protocol.TopicInfo); ok && c.srv.cluster != nil {
			if t, found := b.Topic(broker.TopicName(ti.Name)); found && t.ID() == broker.TopicID(ti.ID) {
				c.fillElsewhere(t, &ti) // forward_holders.go: counts of partitions held elsewhere
				v = ti
			}
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

// accessTopic is what a permission decision needs of t.
func accessTopic(t *broker.Topic) access.Topic {
	return access.Topic{Name: string(t.Name()), Subjects: t.Subjects()}
}

// lookupTopic finds the topic name for the identity: permission_denied
// before the lookup when see refuses the bare name, unknown_topic, then
// permission_denied when check refuses the topic as found.
func lookupTopic(b *broker.Broker, name string, pre func(access.Topic) error, check func(access.Topic) error) (*broker.Topic, error) {
	if err := pre(access.Topic{Name: name}); err != nil {
		return nil, err
	}
	t, ok := b.Topic(broker.TopicName(name))
	if !ok {
		return nil, protocol.NewError(protocol.CodeUnknownTopic, strconv.Quote(name))
	}
	if err := check(accessTopic(t)); err != nil {
		return nil, err
	}
	return t, nil
}

// seeErr turns Identity.SeeTopic into a decision with an error.
func seeErr(id *access.Identity) func(access.Topic) error {
	return func(t access.Topic) error {
		if !id.SeeTopic(t) {
			return protocol.NewError(protocol.CodePermissionDenied, "for topic "+strconv.Quote(t.Name))
		}
		return nil
	}
}

// manage performs one management verb for identity id and returns the
// JSON answer value.
func manage(b *broker.Broker, id *access.Identity, op protocol.Op, name, group string, js []byte) (any, error) {
	switch op {
	case protocol.OpTopicCreate:
		var wc protocol.TopicConfig
		if err := protocol.DecodeStrict(js, &wc); err != nil {
			return nil, err
		}
		if err := id.CreateTopic(access.Topic{Name: name, Subjects: wc.Subjects}); err != nil {
			return nil, err
		}
		cfg := broker.TopicConfig(wc) // one schema (wire.TopicConfig): a conversion, not a copy
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
		t, err := lookupTopic(b, name, seeErr(id), seeErr(id))
		if err != nil {
			return nil, err
		}
		return topicInfo(t), nil
	case protocol.OpTopicList:
		out := protocol.TopicList{Topics: []string{}}
		for _, t := range b.Topics() {
			if id.SeeTopic(accessTopic(t)) {
				out.Topics = append(out.Topics, string(t.Name()))
			}
		}
		return out, nil
	case protocol.OpTopicDelete:
		if _, err := lookupTopic(b, name, id.ManageTopic, id.ManageTopic); err != nil {
			return nil, err
		}
		if err := b.DeleteTopic(broker.TopicName(name)); err != nil {
			return nil, err
		}
		return protocol.Deleted{Topic: name}, nil
	case protocol.OpTopicRequeue:
		return requeue(b, id, name, js)
	}
	check := id.ConsumeTopic // GROUP CREATE, GROUP DELETE
	if op == protocol.OpGroupInfo || op == protocol.OpGroupList {
		check = seeErr(id)
	}
	t, err := lookupTopic(b, name, check, check)
	if err != nil {
		return nil, err
	}
	switch op {
	case protocol.OpGroupCreate:
		var wc protocol.GroupConfig
		if err := protocol.DecodeStrict(js, &wc); err != nil {
			return nil, err
		}
		if err := checkDeadLetter(b, id, name, group, wc.DeadLetter); err != nil {
			return nil, err
		}
		cfg := broker.GroupConfig(wc)
		if old, exists := t.FindGroup(broker.GroupName(group)); exists {
			// SPEC.md section 10: the same configuration again is +OK.
			if want, err := cfg.Resolve(t.Name(), broker.GroupName(group)); err != nil || !want.Equal(old.Config()) {
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

// checkDeadLetter decides a GROUP CREATE's dead_letter target (SPEC.md
// 6.1): the default, none, or a topic the identity may publish to (or
// create, when missing).
func checkDeadLetter(b *broker.Broker, id *access.Identity, topic, group, target string) error {
	var existing *access.Topic
	if t, ok := b.Topic(broker.TopicName(target)); ok && target != "" {
		at := accessTopic(t)
		existing = &at
	}
	return id.DeadLetter(topic, group, target, existing)
}

func topicInfo(t *broker.Topic) protocol.TopicInfo {
	in := t.Info()
	out := protocol.TopicInfo{
		Name: string(in.Name), ID: uint64(in.ID),
		Config: protocol.TopicConfig(in.Config),
		Msgs:   uint64(max(in.Messages, 0)), Bytes: uint64(max(in.Bytes, 0)),
		Groups: []string{},
	}
	for i, p := range in.Partitions {
		pi := protocol.PartitionInfo{Partition: uint32(i), FirstSeq: uint64(p.FirstSeq), LastSeq: uint64(p.LastSeq), Bytes: uint64(max(p.Bytes, 0)),
			Replicas: t.Holders(broker.Partition(i))}
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
	out := groupInfo(in)
	for i := range out.Partitions {
		out.Partitions[i].Replicas = g.Topic().Holders(broker.Partition(out.Partitions[i].Partition))
	}
	return out, nil
}

// groupInfo maps the engine's description onto the wire's.
func groupInfo(in broker.GroupInfo) protocol.GroupInfo {
	c := in.Config
	if c.NATSAck == "" {
		c.NATSAck = broker.NATSAckAuto
	}
	out := protocol.GroupInfo{
		Topic: string(in.Topic), Name: string(in.Name), ID: uint64(in.ID),
		Config:       protocol.GroupConfig(c),
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
