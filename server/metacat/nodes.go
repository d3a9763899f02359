package metacat

// The node records a node has applied, kept in nodes.json in
// Config.Dir: written to a temporary file, fsynced, renamed over the old
// one and the directory fsynced, so a crash leaves the old file or the
// new one.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

const nodesName = "nodes.json"

// readNodes returns the records in dir's nodes.json (none when there is
// no file). A file that does not decode is refused, naming it.
func readNodes(dir string) (map[string]NodeInfo, error) {
	path := filepath.Join(dir, nodesName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("metacat: %w", err)
	}
	var nodes map[string]NodeInfo
	if err := json.Unmarshal(b, &nodes); err != nil {
		return nil, fmt.Errorf("metacat: %s is damaged: %w", path, err)
	}
	return nodes, nil
}

// writeNodes replaces dir's nodes.json with nodes, durably.
func writeNodes(dir string, nodes map[string]NodeInfo) error {
	b, err := json.Marshal(nodes)
	if err != nil {
		return fmt.Errorf("metacat: encode node records: %w", err)
	}
	path := filepath.Join(dir, nodesName)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("metacat: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("metacat: write %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("metacat: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("metacat: sync %s: %w", dir, err)
	}
	return nil
}
