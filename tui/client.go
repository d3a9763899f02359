package tui

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	fibril "github.com/fibrilmq/fibril/sdk"
)

// client is the UI's one connection: a Go SDK Conn (fibril mode) plus the
// per-call timeout. Safe for concurrent use, as the Conn is.
type client struct {
	conn    *fibril.Conn
	timeout time.Duration
}

// dial connects to o.URL; o.Token or o.User/o.Pass override credentials in
// the URL. It fails if the server does not speak fibril.
func dial(ctx context.Context, o Options) (*client, error) {
	opts := []fibril.Option{fibril.WithName("fibril-tui"), fibril.WithDialTimeout(o.Timeout)}
	switch {
	case o.Token != "":
		opts = append(opts, fibril.WithToken(o.Token))
	case o.User != "":
		opts = append(opts, fibril.WithUserPassword(o.User, o.Pass))
	}
	conn, err := fibril.Connect(ctx, o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("tui: %w", err)
	}
	return &client{conn: conn, timeout: o.Timeout}, nil
}

func (c *client) close() error { return c.conn.Close() }

// call bounds one wire call.
func (c *client) call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.timeout)
}

func (c *client) topicList() ([]string, error) {
	ctx, cancel := c.call()
	defer cancel()
	return c.conn.Topics(ctx)
}

func (c *client) topicInfo(name string) (*fibril.TopicInfo, error) {
	ctx, cancel := c.call()
	defer cancel()
	return c.conn.Topic(ctx, name)
}

func (c *client) groupInfo(topic, group string) (*fibril.GroupInfo, error) {
	ctx, cancel := c.call()
	defer cancel()
	return c.conn.Group(ctx, topic, group)
}

func (c *client) groupCreate(topic, group string) error {
	ctx, cancel := c.call()
	defer cancel()
	_, err := c.conn.CreateGroup(ctx, topic, group, fibril.GroupConfig{})
	return err
}

// topicCreate creates topic name with the server's defaults; an existing
// topic of that name is no error.
func (c *client) topicCreate(name string) error {
	ctx, cancel := c.call()
	defer cancel()
	_, err := c.conn.CreateTopic(ctx, name, fibril.TopicConfig{})
	if errors.Is(err, protocol.ErrTopicExists) {
		return nil
	}
	return err
}

// demoGroupCreate creates DemoGroup on topic, with no dead-letter topic
// (so that it leaves nothing behind once deleted). An existing DemoGroup
// is no error.
func (c *client) demoGroupCreate(topic string) error {
	ctx, cancel := c.call()
	defer cancel()
	_, err := c.conn.CreateGroup(ctx, topic, DemoGroup, fibril.GroupConfig{DeadLetter: "-"})
	if errors.Is(err, protocol.ErrGroupExists) {
		return nil
	}
	return err
}

// demoGroupDelete deletes DemoGroup from topic (gone already: no error).
func (c *client) demoGroupDelete(topic string) error {
	ctx, cancel := c.call()
	defer cancel()
	err := c.conn.DeleteGroup(ctx, topic, DemoGroup)
	if errors.Is(err, protocol.ErrUnknownGroup) || errors.Is(err, protocol.ErrUnknownTopic) {
		return nil
	}
	return err
}

// publish sends n confirmed messages to subject, pipelined within the
// server's max_unconfirmed window, and returns how many were stored (and
// the first error). Each message gets the timeout to be sent and again to
// be confirmed.
func (c *client) publish(subject string, n int, payload func(i int) []byte) (int, error) {
	futs := make([]*fibril.PubFuture, 0, n)
	var first error
	for i := range n {
		ctx, cancel := c.call()
		f, err := c.conn.PublishAsync(ctx, subject, payload(i))
		cancel()
		if err != nil {
			first = err
			break
		}
		futs = append(futs, f)
	}
	stored := 0
	for _, f := range futs {
		ctx, cancel := c.call()
		pos, err := f.Wait(ctx)
		cancel()
		switch {
		case err != nil && first == nil:
			first = err
		case err == nil && pos.Stored:
			stored++
		}
	}
	return stored, first
}

// poll leases up to max ready messages of topic/group without waiting.
func (c *client) poll(topic, group string, max int) ([]*fibril.Msg, error) {
	ctx, cancel := c.call()
	defer cancel()
	return c.conn.Fetch(ctx, topic, group, max, 0)
}

// ack acknowledges msgs in as few ACK commands as fit (none: no command).
func (c *client) ack(msgs []*fibril.Msg) error {
	if len(msgs) == 0 {
		return nil
	}
	ctx, cancel := c.call()
	defer cancel()
	return c.conn.AckAll(ctx, msgs...)
}

// consume polls up to max messages of topic/group and acks them all; it
// returns how many were acked.
func (c *client) consume(topic, group string, max int) (int, error) {
	msgs, err := c.poll(topic, group, max)
	if err != nil && len(msgs) == 0 {
		return 0, err
	}
	if aerr := c.ack(msgs); aerr != nil {
		return 0, errors.Join(err, aerr)
	}
	return len(msgs), err
}
