package server

// Plain NATS subject routing: a trie of subject tokens whose levels also hold
// the `*` (one token) and `>` (one or more trailing tokens) wildcard children.
// It serves SUB/UNSUB and the fan-out of PUB/HPUB; durable topics are routed
// by the broker, not here.
//
// The results of recent matches are cached by subject (as nats-server's
// sublist does): a publisher repeating a subject costs one map lookup, not a
// walk of the trie and of its nodes' maps. The cache holds at most
// slCacheMax subjects; an insert or remove drops the entries it could change
// (the filter's own subject for a literal filter, every entry for a
// wildcard one), so a match never returns a stale result.

import (
	"strings"
	"sync"

	"github.com/fibrilmq/fibril/wire"
)

// sublist holds every plain subscription of the server. Safe for concurrent
// use: PUBs from all event loops match under the read lock. mu is a leaf
// lock (callers may hold client.mu).
type sublist struct {
	mu    sync.RWMutex
	root  *slLevel
	count int
	// gen counts inserts and removes: a result computed under the read
	// lock is cached only if no change came in between.
	gen   uint64
	cache map[string]*slResult
}

// slCacheMax bounds the subjects whose match results are cached; past it
// an arbitrary entry makes room.
const slCacheMax = 1024

// slResult is what one subject matches: the subscriptions outside queue
// groups, and one list per queue group. Shared and read-only once built.
type slResult struct {
	plain  []*subscription
	queues [][]*subscription
}

// all is every subscription of r, appended to out.
func (r *slResult) all(out []*subscription) []*subscription {
	out = append(out, r.plain...)
	for _, q := range r.queues {
		out = append(out, q...)
	}
	return out
}

// newResult groups matched subscriptions by queue group, keeping the order
// in which each group was first matched.
func newResult(subs []*subscription) *slResult {
	r := &slResult{}
	var groups map[string]int // queue name -> index in r.queues
	for _, s := range subs {
		if s.queue == "" {
			r.plain = append(r.plain, s)
			continue
		}
		if groups == nil {
			groups = make(map[string]int)
		}
		i, ok := groups[s.queue]
		if !ok {
			i = len(r.queues)
			groups[s.queue] = i
			r.queues = append(r.queues, nil)
		}
		r.queues[i] = append(r.queues[i], s)
	}
	return r
}

type slLevel struct {
	nodes map[string]*slNode
	pwc   *slNode // "*"
	fwc   *slNode // ">"
}

type slNode struct {
	next *slLevel
	subs map[*subscription]struct{}
}

func newSublist() *sublist {
	return &sublist{root: newLevel(), cache: make(map[string]*slResult)}
}

func newLevel() *slLevel { return &slLevel{nodes: make(map[string]*slNode)} }

func (l *slLevel) child(tok string, create bool) *slNode {
	var n *slNode
	switch tok {
	case "*":
		n = l.pwc
	case ">":
		n = l.fwc
	default:
		n = l.nodes[tok]
	}
	if n != nil || !create {
		return n
	}
	n = &slNode{subs: make(map[*subscription]struct{})}
	switch tok {
	case "*":
		l.pwc = n
	case ">":
		l.fwc = n
	default:
		l.nodes[tok] = n
	}
	return n
}

func (l *slLevel) empty() bool { return len(l.nodes) == 0 && l.pwc == nil && l.fwc == nil }

// insert adds s under s.subject, which must be a valid filter.
func (sl *sublist) insert(s *subscription) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	l := sl.root
	var n *slNode
	for rest, more := s.subject, true; more; {
		var tok string
		tok, rest, more = wire.Cut(rest)
		n = l.child(tok, true)
		if n.next == nil {
			n.next = newLevel()
		}
		l = n.next
	}
	n.subs[s] = struct{}{}
	sl.count++
	sl.changedLocked(s.subject)
}

// changedLocked drops the cached results a change of filter's
// subscriptions could alter (sl.mu held for writing). A literal filter is
// matched only by its own subject; a wildcard may match any.
func (sl *sublist) changedLocked(filter string) {
	sl.gen++
	if isLiteral(filter) {
		delete(sl.cache, filter)
		return
	}
	clear(sl.cache)
}

// isLiteral reports whether filter has no wildcard token.
func isLiteral(filter string) bool {
	for rest, more := filter, true; more; {
		var tok string
		tok, rest, more = wire.Cut(rest)
		if tok == "*" || tok == ">" {
			return false
		}
	}
	return true
}

// remove deletes s; it reports whether s was present. Empty branches are
// pruned so the trie does not keep every subject ever used.
func (sl *sublist) remove(s *subscription) bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	found := sl.removeAt(sl.root, s, s.subject)
	if found {
		sl.changedLocked(s.subject)
	}
	return found
}

// removeAt removes s under the tokens of subject (its rest below l).
func (sl *sublist) removeAt(l *slLevel, s *subscription, subject string) bool {
	tok, rest, more := wire.Cut(subject)
	n := l.child(tok, false)
	if n == nil {
		return false
	}
	var found bool
	if !more {
		if _, found = n.subs[s]; found {
			delete(n.subs, s)
			sl.count--
		}
	} else if n.next != nil {
		found = sl.removeAt(n.next, s, rest)
	}
	if found && len(n.subs) == 0 && (n.next == nil || n.next.empty()) {
		switch tok {
		case "*":
			l.pwc = nil
		case ">":
			l.fwc = nil
		default:
			delete(l.nodes, tok)
		}
	}
	return found
}

// match appends to out every subscription whose filter matches subject (a
// literal subject) and returns the extended slice.
func (sl *sublist) match(subject string, out []*subscription) []*subscription {
	return sl.matchResult(subject).all(out)
}

// matchResult returns the subscriptions whose filters match subject (a
// literal subject), from the cache when it has them. The result is shared:
// the caller must not modify it. subject is copied if it is cached.
func (sl *sublist) matchResult(subject string) *slResult {
	sl.mu.RLock()
	if r, ok := sl.cache[subject]; ok {
		sl.mu.RUnlock()
		return r
	}
	gen := sl.gen
	r := newResult(matchLevel(sl.root, subject, nil))
	sl.mu.RUnlock()
	sl.mu.Lock()
	if sl.gen == gen {
		if len(sl.cache) >= slCacheMax {
			for k := range sl.cache {
				delete(sl.cache, k)
				break
			}
		}
		sl.cache[strings.Clone(subject)] = r
	}
	sl.mu.Unlock()
	return r
}

func matchLevel(l *slLevel, rest string, out []*subscription) []*subscription {
	tok, tail, more := wire.Cut(rest)
	if l.fwc != nil {
		for s := range l.fwc.subs {
			out = append(out, s)
		}
	}
	if n := l.pwc; n != nil {
		out = matchNode(n, tail, more, out)
	}
	if n := l.nodes[tok]; n != nil {
		out = matchNode(n, tail, more, out)
	}
	return out
}

func matchNode(n *slNode, tail string, more bool, out []*subscription) []*subscription {
	if !more {
		for s := range n.subs {
			out = append(out, s)
		}
		return out
	}
	if n.next == nil {
		return out
	}
	return matchLevel(n.next, tail, out)
}

// validSubject reports whether s is a literal subject a message can be
// published to (wire.CheckSubject without wildcards).
func validSubject(s string) bool { return wire.ValidSubject(s) }

// validFilter reports whether s is a subscription filter: like a subject, but
// a token may be `*`, and the last token may be `>` (wire.CheckSubject). A
// wildcard inside a token (`a*`) is refused, as the parser refuses it.
func validFilter(s string) bool { return wire.ValidFilter(s) }
