package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Fetches: a state machine whose snapshots are descriptors of data they
// do not carry (package replog's: a partition's segment logs) fetches
// that data from another replica of its group when it restores one.
// The group only routes: Config.Fetch opens the stream (a Node's is its
// cluster link), and the replica asked answers with the function its
// owner registered (ServeFetch). Request and stream are the state
// machine's own format.

// ErrNoFetch: the group has no way to fetch (Config.Fetch unset), or the
// replica asked serves no fetches (no ServeFetch yet).
var ErrNoFetch = errors.New("cluster: fetch not supported")

// FetchServer answers a fetch from the replica from: it writes the
// stream req asks for to w and returns nil at its end, or an error,
// which the fetching replica reads as a failed stream. It runs on a
// goroutine of the transport's, may block on w (the transport bounds the
// time), and must not keep req or w.
type FetchServer func(from uint64, req []byte, w io.Writer) error

// Fetch opens the stream req asks of the replica to (Config.Fetch),
// which ends by ctx's deadline if not sooner; the caller closes it. It
// fails with ErrNoFetch when the group cannot fetch, or with the
// transport's error.
func (g *Group) Fetch(ctx context.Context, to uint64, req []byte) (io.ReadCloser, error) {
	if g.fetch == nil {
		return nil, fmt.Errorf("%w: group has no fetch link", ErrNoFetch)
	}
	return g.fetch(ctx, to, req)
}

// ServeFetch makes fn answer the fetches of the group's other replicas
// (AnswerFetch). A fetch that arrives before it fails with ErrNoFetch,
// and the fetching replica tries again.
func (g *Group) ServeFetch(fn FetchServer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.server = fn
}

// AnswerFetch answers a fetch from the replica from with the server
// ServeFetch registered (ErrNoFetch without one). The transport that
// carries the group's fetches calls it; it blocks as the server does.
func (g *Group) AnswerFetch(from uint64, req []byte, w io.Writer) error {
	g.mu.Lock()
	fn := g.server
	g.mu.Unlock()
	if fn == nil {
		return fmt.Errorf("%w: no server registered", ErrNoFetch)
	}
	return fn(from, req, w)
}
