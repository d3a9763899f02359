package metacat

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/fibrilmq/fibril/server/broker"
)

// machine is the metadata group's state machine over the Catalog.
type machine Catalog

func (m *machine) broker() (*broker.Broker, error) {
	b := m.b.Load()
	if b == nil {
		return nil, errors.New("metacat: no broker attached before the group opened")
	}
	return b, nil
}

// Applied is the broker's catalog index: what it holds durably.
func (m *machine) Applied() uint64 {
	b := m.b.Load()
	if b == nil {
		return 0
	}
	return b.CatalogIndex()
}

// Apply hands a catalog change to the broker and its result to the
// proposal waiting here, or takes a node record.
func (m *machine) Apply(index uint64, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	switch data[0] {
	case tagNode:
		var rec struct {
			Name string   `json:"name"`
			Info NodeInfo `json:"info"`
		}
		if err := json.Unmarshal(data[1:], &rec); err != nil || rec.Name == "" {
			return fmt.Errorf("metacat: node record at %d: %v", index, err)
		}
		return m.setNode(rec.Name, rec.Info)
	case tagChange:
		name, rest, ok := bytes.Cut(data[1:], []byte{0})
		if !ok || len(rest) < 8 {
			return fmt.Errorf("metacat: catalog entry at %d: malformed", index)
		}
		n := binary.LittleEndian.Uint64(rest)
		b, err := m.broker()
		if err != nil {
			return err
		}
		res, err := b.ApplyCatalog(index, rest[8:])
		if err != nil {
			return err // the group stops: this node must not go on without the change
		}
		if string(name) == m.cfg.Node {
			m.mu.Lock()
			ch := m.waiting[n]
			m.mu.Unlock()
			if ch != nil {
				ch <- res
			}
		}
		return nil
	}
	return fmt.Errorf("metacat: entry at %d: unknown tag %q", index, data[0])
}

// setNode takes a node record, keeping the records in Config.Dir before
// it returns: once a later catalog change moves the broker's index past
// the record, a restart no longer applies it again. Called on the apply
// goroutine only (one writer of the file).
func (m *machine) setNode(name string, info NodeInfo) error {
	m.mu.Lock()
	changed := m.nodes[name] != info
	m.nodes[name] = info
	nodes := maps.Clone(m.nodes)
	m.mu.Unlock()
	if !changed {
		return nil
	}
	if m.cfg.Dir != "" {
		if err := writeNodes(m.cfg.Dir, nodes); err != nil {
			return err // the group stops: a restart would forget the record
		}
	}
	if m.cfg.OnNodes != nil {
		m.cfg.OnNodes(nodes)
	}
	return nil
}

// snapshot is the state a snapshot carries.
type snapshot struct {
	Catalog json.RawMessage     `json:"catalog"`
	Nodes   map[string]NodeInfo `json:"nodes"`
}

func (m *machine) Snapshot() ([]byte, error) {
	b, err := m.broker()
	if err != nil {
		return nil, err
	}
	cat, err := b.CatalogSnapshot()
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	nodes := maps.Clone(m.nodes)
	m.mu.Unlock()
	return json.Marshal(snapshot{Catalog: cat, Nodes: nodes})
}

func (m *machine) Restore(index uint64, data []byte) error {
	b, err := m.broker()
	if err != nil {
		return err
	}
	if len(data) == 0 {
		return nil // a new group's first snapshot: nothing yet
	}
	var s snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("metacat: snapshot at %d: %w", index, err)
	}
	if len(s.Catalog) > 0 {
		if err := b.RestoreCatalog(index, s.Catalog); err != nil {
			return err
		}
	}
	for name, info := range s.Nodes {
		if err := m.setNode(name, info); err != nil {
			return err
		}
	}
	return nil
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
