package fibril

import (
	"context"
	"encoding/json"
	"fmt"
)

// TopicConfig configures a topic (SPEC.md "TOPIC CREATE"). Zero values mean
// the server's defaults.
type TopicConfig struct {
	Subjects          []string `json:"subjects,omitempty"`
	Partitions        int      `json:"partitions,omitempty"`
	Durability        string   `json:"durability,omitempty"` // sync | group | none
	Retention         string   `json:"retention,omitempty"`  // workqueue | limits
	MaxAgeMS          int64    `json:"max_age_ms,omitempty"`
	MaxBytes          int64    `json:"max_bytes,omitempty"`
	MaxMsgs           int64    `json:"max_msgs,omitempty"`
	MaxUnsettledMsgs  int64    `json:"max_unsettled_msgs,omitempty"`
	MaxUnsettledBytes int64    `json:"max_unsettled_bytes,omitempty"`
	FullPolicy        string   `json:"full_policy,omitempty"` // block | reject
}

// GroupConfig configures a consumer group (SPEC.md "GROUP CREATE").
type GroupConfig struct {
	Start         string `json:"start,omitempty"` // earliest | new
	LeaseMS       int64  `json:"lease_ms,omitempty"`
	MaxDeliveries int    `json:"max_deliveries,omitempty"`
	DeadLetter    string `json:"dead_letter,omitempty"`
}

// TopicInfo is the server's description of a topic. Raw holds the whole
// JSON answer for fields this client does not name.
type TopicInfo struct {
	Name   string          `json:"name"`
	Config TopicConfig     `json:"config"`
	Raw    json.RawMessage `json:"-"`
}

// GroupInfo is the server's description of a consumer group.
type GroupInfo struct {
	Topic  string          `json:"topic"`
	Name   string          `json:"name"`
	Config GroupConfig     `json:"config"`
	Raw    json.RawMessage `json:"-"`
}

// admin sends a management command and decodes its "+OK <json>" into out.
func (c *Conn) admin(ctx context.Context, out any, words ...string) error {
	b := []byte{}
	for i, w := range words {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, w...)
	}
	r, err := c.roundTrip(ctx, reqJSON, append(b, "\r\n"...))
	if err != nil {
		return fmt.Errorf("fibril: %s %s: %w", words[0], words[1], err)
	}
	if out == nil || r.arg == "" {
		return nil
	}
	if err := json.Unmarshal([]byte(r.arg), out); err != nil {
		return fmt.Errorf("%w: %s %s answer: %w", ErrProtocol, words[0], words[1], err)
	}
	return nil
}

func configJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return string(b), nil
}

// CreateTopic creates topic name with cfg and returns its description.
func (c *Conn) CreateTopic(ctx context.Context, name string, cfg TopicConfig) (*TopicInfo, error) {
	if err := checkSubject(name); err != nil {
		return nil, err
	}
	js, err := configJSON(cfg)
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err := c.admin(ctx, &raw, "TOPIC", "CREATE", name, js); err != nil {
		return nil, err
	}
	return decodeTopic(raw)
}

// Topic returns the description of topic name.
func (c *Conn) Topic(ctx context.Context, name string) (*TopicInfo, error) {
	if err := checkSubject(name); err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err := c.admin(ctx, &raw, "TOPIC", "INFO", name); err != nil {
		return nil, err
	}
	return decodeTopic(raw)
}

// Topics lists every topic.
func (c *Conn) Topics(ctx context.Context) ([]*TopicInfo, error) {
	var raw json.RawMessage
	if err := c.admin(ctx, &raw, "TOPIC", "LIST"); err != nil {
		return nil, err
	}
	return decodeList(raw, decodeTopic, "topics")
}

// DeleteTopic deletes topic name and its groups.
func (c *Conn) DeleteTopic(ctx context.Context, name string) error {
	if err := checkSubject(name); err != nil {
		return err
	}
	return c.admin(ctx, nil, "TOPIC", "DELETE", name)
}

// CreateGroup creates consumer group group on topic with cfg.
func (c *Conn) CreateGroup(ctx context.Context, topic, group string, cfg GroupConfig) (*GroupInfo, error) {
	if err := checkSubject(topic); err != nil {
		return nil, err
	}
	if err := checkSubject(group); err != nil {
		return nil, err
	}
	js, err := configJSON(cfg)
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err := c.admin(ctx, &raw, "GROUP", "CREATE", topic, group, js); err != nil {
		return nil, err
	}
	return decodeGroup(raw)
}

// Group returns the description of group on topic.
func (c *Conn) Group(ctx context.Context, topic, group string) (*GroupInfo, error) {
	var raw json.RawMessage
	if err := c.admin(ctx, &raw, "GROUP", "INFO", topic, group); err != nil {
		return nil, err
	}
	return decodeGroup(raw)
}

// Groups lists the groups of topic.
func (c *Conn) Groups(ctx context.Context, topic string) ([]*GroupInfo, error) {
	var raw json.RawMessage
	if err := c.admin(ctx, &raw, "GROUP", "LIST", topic); err != nil {
		return nil, err
	}
	return decodeList(raw, decodeGroup, "groups")
}

// DeleteGroup deletes group on topic.
func (c *Conn) DeleteGroup(ctx context.Context, topic, group string) error {
	return c.admin(ctx, nil, "GROUP", "DELETE", topic, group)
}

func decodeTopic(raw json.RawMessage) (*TopicInfo, error) {
	ti := &TopicInfo{Raw: raw}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, ti); err != nil {
			return nil, fmt.Errorf("%w: topic info: %w", ErrProtocol, err)
		}
	}
	return ti, nil
}

func decodeGroup(raw json.RawMessage) (*GroupInfo, error) {
	gi := &GroupInfo{Raw: raw}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, gi); err != nil {
			return nil, fmt.Errorf("%w: group info: %w", ErrProtocol, err)
		}
	}
	return gi, nil
}

// decodeList accepts a JSON array or an object holding one under key.
func decodeList[T any](raw json.RawMessage, dec func(json.RawMessage) (*T, error), key string) ([]*T, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		var obj map[string][]json.RawMessage
		if err2 := json.Unmarshal(raw, &obj); err2 != nil {
			return nil, fmt.Errorf("%w: %s list: %w", ErrProtocol, key, err)
		}
		items = obj[key]
	}
	out := make([]*T, 0, len(items))
	for _, it := range items {
		v, err := dec(it)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
