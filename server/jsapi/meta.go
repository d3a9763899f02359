package jsapi

// The JetStream settings the engine does not keep (a stream's description,
// duplicate window, storage; a consumer's max ack pending, whether it is
// ephemeral, ...): one JSON file per stream and per consumer under Dir,
// written temp file, fsync, rename, then the directory fsynced.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

type streamMeta struct {
	Config  StreamConfig `json:"config"`
	Created time.Time    `json:"created"`
}

type consumerMeta struct {
	Config    ConsumerConfig `json:"config"`
	Created   time.Time      `json:"created"`
	Ephemeral bool           `json:"ephemeral,omitempty"`
}

// consumerKey names a consumer of a stream.
type consumerKey struct{ stream, consumer string }

// metaStore holds the settings in memory and on disk. mu is never held
// while the engine is called.
type metaStore struct {
	dir       string
	mu        sync.Mutex
	streams   map[string]streamMeta
	consumers map[consumerKey]consumerMeta
}

func openMeta(dir string) (*metaStore, error) {
	m := &metaStore{dir: dir, streams: map[string]streamMeta{}, consumers: map[consumerKey]consumerMeta{}}
	if dir == "" {
		return m, nil // in memory only (tests)
	}
	for _, sub := range []string{"streams", "consumers"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("jsapi: settings directory: %w", err)
		}
	}
	ents, err := os.ReadDir(filepath.Join(dir, "streams"))
	if err != nil {
		return nil, fmt.Errorf("jsapi: read settings: %w", err)
	}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !streamName(name) {
			continue // a temp file a crash left
		}
		var sm streamMeta
		if err := readJSON(filepath.Join(dir, "streams", e.Name()), &sm); err != nil {
			return nil, err
		}
		m.streams[name] = sm
	}
	cdirs, err := os.ReadDir(filepath.Join(dir, "consumers"))
	if err != nil {
		return nil, fmt.Errorf("jsapi: read settings: %w", err)
	}
	for _, d := range cdirs {
		if !d.IsDir() || !streamName(d.Name()) {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(dir, "consumers", d.Name()))
		if err != nil {
			return nil, fmt.Errorf("jsapi: read settings: %w", err)
		}
		for _, e := range ents {
			name, ok := strings.CutSuffix(e.Name(), ".json")
			if !ok || !streamName(name) {
				continue
			}
			var cm consumerMeta
			if err := readJSON(filepath.Join(dir, "consumers", d.Name(), e.Name()), &cm); err != nil {
				return nil, err
			}
			m.consumers[consumerKey{d.Name(), name}] = cm
		}
	}
	return m, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("jsapi: read settings: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		// Refuse rather than guess: the operator restores or removes it.
		return fmt.Errorf("jsapi: settings file %s is damaged: %w", path, err)
	}
	return nil
}

// writeJSON writes v to path durably (temp file, fsync, rename, dir fsync).
func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("jsapi: write settings: %w", err)
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("jsapi: write settings: %w", err)
	}
	_, werr := f.Write(b)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("jsapi: write settings %s: %w", path, werr)
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("jsapi: sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("jsapi: sync %s: %w", dir, err)
	}
	return nil
}

func (m *metaStore) stream(name string) (streamMeta, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sm, ok := m.streams[name]
	return sm, ok
}

func (m *metaStore) putStream(name string, sm streamMeta) error {
	if m.dir != "" {
		if err := writeJSON(filepath.Join(m.dir, "streams", name+".json"), sm); err != nil {
			return err
		}
	}
	m.mu.Lock()
	m.streams[name] = sm
	m.mu.Unlock()
	return nil
}

// dropStream forgets a stream and its consumers.
func (m *metaStore) dropStream(name string) error {
	m.mu.Lock()
	delete(m.streams, name)
	for k := range m.consumers {
		if k.stream == name {
			delete(m.consumers, k)
		}
	}
	m.mu.Unlock()
	if m.dir == "" {
		return nil
	}
	err := os.Remove(filepath.Join(m.dir, "streams", name+".json"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("jsapi: remove settings: %w", err)
	}
	if err := os.RemoveAll(filepath.Join(m.dir, "consumers", name)); err != nil {
		return fmt.Errorf("jsapi: remove settings: %w", err)
	}
	return nil
}

func (m *metaStore) consumer(k consumerKey) (consumerMeta, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cm, ok := m.consumers[k]
	return cm, ok
}

func (m *metaStore) putConsumer(k consumerKey, cm consumerMeta) error {
	if m.dir != "" {
		if err := writeJSON(filepath.Join(m.dir, "consumers", k.stream, k.consumer+".json"), cm); err != nil {
			return err
		}
	}
	m.mu.Lock()
	m.consumers[k] = cm
	m.mu.Unlock()
	return nil
}

func (m *metaStore) dropConsumer(k consumerKey) error {
	m.mu.Lock()
	delete(m.consumers, k)
	m.mu.Unlock()
	if m.dir == "" {
		return nil
	}
	err := os.Remove(filepath.Join(m.dir, "consumers", k.stream, k.consumer+".json"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("jsapi: remove settings: %w", err)
	}
	return nil
}

// ephemerals lists the ephemeral consumers.
func (m *metaStore) ephemerals() []consumerKey {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []consumerKey
	for k, cm := range m.consumers {
		if cm.Ephemeral {
			out = append(out, k)
		}
	}
	return out
}
