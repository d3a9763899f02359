package server

// Plain NATS subject routing: a trie of subject tokens whose levels also hold
// the `*` (one token) and `>` (one or more trailing tokens) wildcard children.
// It serves SUB/UNSUB and the fan-out of PUB/HPUB; durable topics are routed
// by the broker, not here.

import (
	"sync"

	"github.com/fibrilmq/fibril/wire"
)

// sublist holds every plain subscription of the server. Safe for concurrent
// use: PUBs from all event loops match under the read lock.
type sublist struct {
	mu    sync.RWMutex
	root  *slLevel
	count int
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

func newSublist() *sublist { return &sublist{root: newLevel()} }

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
}

// remove deletes s; it reports whether s was present. Empty branches are
// pruned so the trie does not keep every subject ever used.
func (sl *sublist) remove(s *subscription) bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.removeAt(sl.root, s, s.subject)
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
	sl.mu.RLock()
	defer sl.mu.RUnlock()
	return matchLevel(sl.root, subject, out)
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
