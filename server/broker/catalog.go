package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// catalog is the persisted list of topics and groups. Ids come from
// counters that only grow, so an id is never reused.
type catalog struct {
	Version     int        `json:"version"`
	NextTopicID TopicID    `json:"next_topic_id"`
	NextGroupID GroupID    `json:"next_group_id"`
	Topics      []catTopic `json:"topics"`
}

type catTopic struct {
	ID     TopicID     `json:"id"`
	Name   TopicName   `json:"name"`
	Config TopicConfig `json:"config"`
	Groups []catGroup  `json:"groups"`
}

type catGroup struct {
	ID     GroupID     `json:"id"`
	Name   GroupName   `json:"name"`
	Config GroupConfig `json:"config"`
	Paused bool        `json:"paused,omitempty"`
}

const catalogName = "catalog.json"

func loadCatalog(dir string) (catalog, error) {
	b, err := os.ReadFile(filepath.Join(dir, catalogName))
	if errors.Is(err, os.ErrNotExist) {
		return catalog{Version: 1, NextTopicID: 1, NextGroupID: 1}, nil
	}
	if err != nil {
		return catalog{}, fmt.Errorf("read catalog: %w", err)
	}
	var c catalog
	if err := json.Unmarshal(b, &c); err != nil {
		return catalog{}, fmt.Errorf("%w: catalog %s: %v", ErrCorruptState, filepath.Join(dir, catalogName), err)
	}
	if c.NextTopicID == 0 || c.NextGroupID == 0 {
		return catalog{}, fmt.Errorf("%w: catalog has zero id counters", ErrCorruptState)
	}
	for i := range c.Topics {
		tc := &c.Topics[i].Config
		switch tc.Compression {
		case "":
			// Written before the field existed: segments were plain.
			tc.Compression = CompressionNone
		case CompressionNone, CompressionS2, CompressionZstd:
		default:
			return catalog{}, fmt.Errorf("%w: catalog: topic %s: unknown compression %q", ErrCorruptState, c.Topics[i].Name, tc.Compression)
		}
	}
	return c, nil
}

func (c *catalog) save(dir string) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encode catalog: %w", err)
	}
	return writeFileAtomic(dir, catalogName, b)
}

func (c *catalog) topic(name TopicName) *catTopic {
	for i := range c.Topics {
		if c.Topics[i].Name == name {
			return &c.Topics[i]
		}
	}
	return nil
}

func sortNames[T ~string](s []T) { sort.Slice(s, func(i, j int) bool { return s[i] < s[j] }) }
