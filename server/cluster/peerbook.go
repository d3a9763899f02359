package cluster

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/fibrilmq/fibril/server/cluster/transport"
)

// The peer book: the cluster's node list lives in the metadata group. A
// committed peer record ("name@addr" behind peerPrefix, proposed with
// Node.ProposePeer) makes every node link to that node, so a node that
// joins is reached without a manual AddPeer on each member. The book
// wraps the metadata group's state machine: a peer record reaches the
// caller's state machine as an empty entry (its index moves, nothing
// else), snapshots carry the book beside the caller's state, and the
// book is kept in Dir/peers.json (written temp -> fsync -> rename) so
// that a node whose state machine resumes past the records still links
// to every peer at start.

// peerPrefix starts a metadata-group entry that is a peer record; the
// caller's own metadata entries must not start with it.
var peerPrefix = []byte("\xfffibril-peer\x00")

// maxBookPeers bounds the peer book (as transport.MaxPeers bounds links).
const maxBookPeers = transport.MaxPeers

// peerRecord returns the entry data that adds p to the peer book.
func peerRecord(p PeerConfig) []byte {
	return append(append([]byte(nil), peerPrefix...), p.Name+"@"+p.Addr...)
}

// peerBook is the metadata group's state machine: the caller's, with the
// peer records taken out. Apply, Snapshot and Restore run on the group's
// apply worker; peers may be read from any goroutine.
type peerBook struct {
	inner StateMachine
	self  string
	path  string
	link  func(PeerConfig) error // links to a peer (Transport.AddPeer)
	mu    sync.Mutex             // guards peers
	peers map[string]string      // name -> address
}

// openPeerBook loads the book saved in dir (none: empty) and links to
// every peer in it.
func openPeerBook(dir, self string, inner StateMachine, link func(PeerConfig) error) (*peerBook, error) {
	b := &peerBook{inner: inner, self: self, path: filepath.Join(dir, "peers.json"), link: link, peers: map[string]string{}}
	data, err := os.ReadFile(b.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cluster: read peer book: %w", err)
	}
	if err == nil {
		if err := json.Unmarshal(data, &b.peers); err != nil {
			return nil, fmt.Errorf("%w: peer book %s: %v", ErrCorrupt, b.path, err)
		}
	}
	for name, addr := range b.peers {
		if err := b.linkTo(PeerConfig{name, addr}); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// linkTo links to p unless it is this node or linked already.
func (b *peerBook) linkTo(p PeerConfig) error {
	if p.Name == b.self {
		return nil
	}
	if err := b.link(p); err != nil && !errors.Is(err, transport.ErrPeerExists) {
		return fmt.Errorf("cluster: link to peer %s: %w", p.Name, err)
	}
	return nil
}

func (b *peerBook) Applied() uint64 { return b.inner.Applied() }

// Apply takes a peer record into the book (saved, then linked) and hands
// the caller's state machine an empty entry in its place; any other
// entry goes to it as is. A malformed record is refused (the group
// stops), as it can only come from a build that wrote it wrongly.
func (b *peerBook) Apply(index uint64, data []byte) error {
	rec, ok := bytes.CutPrefix(data, peerPrefix)
	if !ok {
		return b.inner.Apply(index, data)
	}
	name, addr, _ := strings.Cut(string(rec), "@")
	if err := checkName(name); err != nil || addr == "" {
		return fmt.Errorf("cluster: peer record at %d %q: bad name or address", index, rec)
	}
	b.mu.Lock()
	changed := b.peers[name] != addr
	full := len(b.peers) >= maxBookPeers && b.peers[name] == ""
	book := maps.Clone(b.peers)
	b.mu.Unlock()
	if full {
		return fmt.Errorf("cluster: peer record at %d: the book holds %d peers already", index, maxBookPeers)
	}
	if changed {
		// Saved before it is shown or linked: what a node acts on
		// survives its restart.
		book[name] = addr
		if err := b.save(book); err != nil {
			return err
		}
		b.mu.Lock()
		b.peers[name] = addr
		b.mu.Unlock()
		if err := b.linkTo(PeerConfig{name, addr}); err != nil {
			return err
		}
	}
	return b.inner.Apply(index, nil)
}

// save writes the book durably: temp file, fsync, rename, dir fsync.
func (b *peerBook) save(book map[string]string) error {
	data, err := json.Marshal(book)
	if err != nil {
		return fmt.Errorf("cluster: save peer book: %w", err)
	}
	tmp := b.path + ".tmp"
	f, err := os.Create(tmp)
	if err == nil {
		_, err = f.Write(data)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Rename(tmp, b.path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(b.path))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cluster: save peer book %s: %w", b.path, err)
	}
	return nil
}

// Snapshot is the book (4-byte length, JSON) then the caller's snapshot.
func (b *peerBook) Snapshot() ([]byte, error) {
	inner, err := b.inner.Snapshot()
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	book, err := json.Marshal(b.peers)
	b.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("cluster: snapshot peer book: %w", err)
	}
	out := binary.BigEndian.AppendUint32(nil, uint32(len(book)))
	return append(append(out, book...), inner...), nil
}

// Restore takes the book out of a snapshot (saved, then linked) and
// restores the caller's state from the rest. An empty snapshot (a
// group's bootstrap) holds neither.
func (b *peerBook) Restore(index uint64, data []byte) error {
	if len(data) == 0 {
		return b.inner.Restore(index, nil)
	}
	if len(data) < 4 || uint64(len(data)-4) < uint64(binary.BigEndian.Uint32(data)) {
		return fmt.Errorf("%w: metadata snapshot %d: %d bytes cannot hold its peer book", ErrCorrupt, index, len(data))
	}
	n := binary.BigEndian.Uint32(data)
	book := map[string]string{}
	if err := json.Unmarshal(data[4:4+n], &book); err != nil {
		return fmt.Errorf("%w: metadata snapshot %d: peer book: %v", ErrCorrupt, index, err)
	}
	b.mu.Lock()
	merged := maps.Clone(b.peers)
	b.mu.Unlock()
	maps.Copy(merged, book)
	if err := b.save(merged); err != nil {
		return err
	}
	b.mu.Lock()
	maps.Copy(b.peers, book)
	b.mu.Unlock()
	for name, addr := range book {
		if err := b.linkTo(PeerConfig{name, addr}); err != nil {
			return err
		}
	}
	return b.inner.Restore(index, data[4+n:])
}

// peerList returns the book's peers.
func (b *peerBook) peerList() map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.peers)
}
