package server

// Plain NATS subject routing: a trie of subject tokens whose levels also hold
// the `*` (one token) and `>` (one or more trailing tokens) wildcard children.
// It serves SUB/UNSUB and the fan-out of PUB/HPUB; durable topics are routed
// by the broker, not here.

import (
	"strings"
	"sync"
	"unicode/utf8"
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
	for tok := range strings.SplitSeq(s.subject, ".") {
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
	return sl.removeAt(sl.root, s, strings.Split(s.subject, "."))
}

func (sl *sublist) removeAt(l *slLevel, s *subscription, toks []string) bool {
	n := l.child(toks[0], false)
	if n == nil {
		return false
	}
	var found bool
	if len(toks) == 1 {
		if _, found = n.subs[s]; found {
			delete(n.subs, s)
			sl.count--
		}
	} else if n.next != nil {
		found = sl.removeAt(n.next, s, toks[1:])
	}
	if found && len(n.subs) == 0 && (n.next == nil || n.next.empty()) {
		switch toks[0] {
		case "*":
			l.pwc = nil
		case ">":
			l.fwc = nil
		default:
			delete(l.nodes, toks[0])
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
	tok, tail, more := strings.Cut(rest, ".")
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
// published to: non-empty dot-separated tokens of valid UTF-8, no
// wildcards, no spaces.
func validSubject(s string) bool { return checkSubject(s, false) }

// validFilter reports whether s is a subscription filter: like a subject, but
// a token may be `*`, and the last token may be `>`.
func validFilter(s string) bool { return checkSubject(s, true) }

func checkSubject(s string, wild bool) bool {
	if s == "" || !utf8.ValidString(s) {
		return false // names must round-trip through JSON byte for byte
	}
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			switch s[i] {
			case ' ', '\t', '\r', '\n', 0:
				return false
			case '.':
			default:
				continue
			}
		}
		tok := s[start:i]
		switch {
		case tok == "":
			return false
		case tok == "*" || tok == ">":
			if !wild || (tok == ">" && i != len(s)) {
				return false
			}
		}
		start = i + 1
	}
	return true
}
