package fibril

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fibrilmq/fibril/protocol"
)

// TopicConfig configures a topic (SPEC.md section 10.1). Zero fields take the
// server's defaults.
type TopicConfig = protocol.TopicConfig

// GroupConfig configures a consumer group (SPEC.md section 10.2).
type GroupConfig = protocol.GroupConfig

// TopicInfo is the server's description of a topic: its configuration with
// every default filled in, and its state.
type TopicInfo = protocol.TopicInfo

// GroupInfo is the server's description of a consumer group.
type GroupInfo = protocol.GroupInfo

// admin sends one management command and decodes its "+OK <json>" into out
// (when out is not nil).
func (c *Conn) admin(ctx context.Context, what string, cmd []byte, out any) error {
	r, err := c.roundTrip(ctx, reqJSON, cmd)
	if err != nil {
		return fmt.Errorf("fibril: %s: %w", what, err)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal([]byte(r.arg), out); err != nil {
		return fmt.Errorf("%w: %s answer %q: %w", ErrProtocol, what, r.arg, err)
	}
	return nil
}

func configJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if string(b) == "{}" {
		return nil, nil // all defaults: send no JSON
	}
	return b, nil
}

// CreateTopic creates topic name with cfg (idempotent for the same
// configuration; ErrTopicExists for a different one) and returns its
// description.
func (c *Conn) CreateTopic(ctx context.Context, name string, cfg TopicConfig) (*TopicInfo, error) {
	if err := checkSubject(name); err != nil {
		return nil, err
	}
	js, err := configJSON(cfg)
	if err != nil {
		return nil, err
	}
	var ti TopicInfo
	if err := c.admin(ctx, "TOPIC CREATE "+name, protocol.AppendTopicCreate(nil, name, js), &ti); err != nil {
		return nil, err
	}
	return &ti, nil
}

// Topic returns the description of topic name (ErrUnknownTopic if none).
func (c *Conn) Topic(ctx context.Context, name string) (*TopicInfo, error) {
	if err := checkSubject(name); err != nil {
		return nil, err
	}
	var ti TopicInfo
	if err := c.admin(ctx, "TOPIC INFO "+name, protocol.AppendTopicInfo(nil, name), &ti); err != nil {
		return nil, err
	}
	return &ti, nil
}

// Topics returns the names of every topic, sorted.
func (c *Conn) Topics(ctx context.Context) ([]string, error) {
	var l protocol.TopicList
	if err := c.admin(ctx, "TOPIC LIST", protocol.AppendTopicList(nil), &l); err != nil {
		return nil, err
	}
	return l.Topics, nil
}

// DeleteTopic deletes topic name with its groups and data. Handles of its
// deliveries become unknown (ErrUnknownHandle).
func (c *Conn) DeleteTopic(ctx context.Context, name string) error {
	if err := checkSubject(name); err != nil {
		return err
	}
	return c.admin(ctx, "TOPIC DELETE "+name, protocol.AppendTopicDelete(nil, name), nil)
}

// RequeueOptions pick the dead letters Requeue moves (SPEC.md 10, TOPIC
// REQUEUE): at most Max (default 1000, at most 100000), those whose
// original subject matches one of Filter (none: any), at offsets FromSeq
// to ToSeq in every partition (0: unbounded).
type RequeueOptions = protocol.RequeueRequest

// Requeued answers Requeue: how many moved and, when it stopped at a
// message it could not move (no topic captures its subject now, or the
// identity may not publish there), why; that message stays.
type Requeued = protocol.Requeued

// Requeue moves dead letters of topic back to the topics that capture their
// original subjects (each published there, durably, then settled in the
// dead-letter topic), as opts picks. It needs the rights TOPIC DELETE needs
// over topic and publish rights for each original subject.
func (c *Conn) Requeue(ctx context.Context, topic string, opts RequeueOptions) (*Requeued, error) {
	if err := checkSubject(topic); err != nil {
		return nil, err
	}
	js, err := configJSON(opts)
	if err != nil {
		return nil, err
	}
	var r Requeued
	if err := c.admin(ctx, "TOPIC REQUEUE "+topic, protocol.AppendTopicRequeue(nil, topic, js), &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// CreateGroup creates consumer group group on topic with cfg (idempotent for
// the same configuration; ErrGroupExists for a different one).
func (c *Conn) CreateGroup(ctx context.Context, topic, group string, cfg GroupConfig) (*GroupInfo, error) {
	if err := checkNames(topic, group); err != nil {
		return nil, err
	}
	js, err := configJSON(cfg)
	if err != nil {
		return nil, err
	}
	var gi GroupInfo
	if err := c.admin(ctx, "GROUP CREATE "+topic+" "+group, protocol.AppendGroupCreate(nil, topic, group, js), &gi); err != nil {
		return nil, err
	}
	return &gi, nil
}

// Group returns the description of group on topic.
func (c *Conn) Group(ctx context.Context, topic, group string) (*GroupInfo, error) {
	if err := checkNames(topic, group); err != nil {
		return nil, err
	}
	var gi GroupInfo
	if err := c.admin(ctx, "GROUP INFO "+topic+" "+group, protocol.AppendGroupInfo(nil, topic, group), &gi); err != nil {
		return nil, err
	}
	return &gi, nil
}

// Groups returns the names of the groups of topic, sorted.
func (c *Conn) Groups(ctx context.Context, topic string) ([]string, error) {
	if err := checkSubject(topic); err != nil {
		return nil, err
	}
	var l protocol.GroupList
	if err := c.admin(ctx, "GROUP LIST "+topic, protocol.AppendGroupList(nil, topic), &l); err != nil {
		return nil, err
	}
	return l.Groups, nil
}

// DeleteGroup deletes group on topic.
func (c *Conn) DeleteGroup(ctx context.Context, topic, group string) error {
	if err := checkNames(topic, group); err != nil {
		return err
	}
	return c.admin(ctx, "GROUP DELETE "+topic+" "+group, protocol.AppendGroupDelete(nil, topic, group), nil)
}

func checkNames(topic, group string) error {
	if err := checkSubject(topic); err != nil {
		return err
	}
	if err := checkSubject(group); err != nil {
		return fmt.Errorf("group: %w", err)
	}
	return nil
}
