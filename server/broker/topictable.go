package broker

import (
	"fmt"
	"math"
	"strings"

	"github.com/fibrilmq/fibril/wire"
)

// topicTable is an immutable routing snapshot, replaced on catalog
// changes. So that a create costs no copy of every topic, a new topic goes
// into recent, a small set copied on each create, and recent is merged
// into base (a full rebuild) once it passes about the square root of the
// topic count: a create costs O(√n) on average, a lookup two map reads.
// A delete rebuilds the table.
type topicTable struct {
	base, recent routeMaps
	wild         []wildFilter // every wildcard filter, base and recent
	n            int          // topics in base and recent
}

// routeMaps index a set of topics.
type routeMaps struct {
	byName map[TopicName]*Topic
	byID   map[TopicID]*Topic
	exact  map[string]*Topic
}

type wildFilter struct {
	filter string
	t      *Topic
}

func newRouteMaps(n int) routeMaps {
	return routeMaps{byName: make(map[TopicName]*Topic, n), byID: make(map[TopicID]*Topic, n), exact: make(map[string]*Topic, n)}
}

// add indexes t (its wildcard filters are appended to wild).
func (m routeMaps) add(t *Topic, wild []wildFilter) []wildFilter {
	m.byName[t.name] = t
	m.byID[t.id] = t
	for _, f := range t.cfg.Subjects {
		if strings.ContainsAny(f, "*>") {
			wild = append(wild, wildFilter{f, t})
		} else {
			m.exact[f] = t
		}
	}
	return wild
}

// newTopicTable indexes ts, all in base.
func newTopicTable(ts []*Topic) *topicTable {
	tt := &topicTable{base: newRouteMaps(len(ts)), recent: newRouteMaps(0), n: len(ts)}
	for _, t := range ts {
		tt.wild = tt.base.add(t, tt.wild)
	}
	return tt
}

// with returns a table that also holds t.
func (tt *topicTable) with(t *Topic) *topicTable {
	if len(tt.recent.byID) >= max(32, int(math.Sqrt(float64(tt.n)))) {
		return newTopicTable(append(tt.list(), t))
	}
	nt := &topicTable{base: tt.base, recent: newRouteMaps(len(tt.recent.byID) + 1), n: tt.n + 1}
	for _, x := range tt.recent.byID {
		nt.recent.add(x, nil)
	}
	nt.wild = nt.recent.add(t, tt.wild[:len(tt.wild):len(tt.wild)])
	return nt
}

// without returns a table without t.
func (tt *topicTable) without(t *Topic) *topicTable {
	ts := tt.list()
	rest := ts[:0]
	for _, x := range ts {
		if x != t {
			rest = append(rest, x)
		}
	}
	return newTopicTable(rest)
}

// list returns the table's topics, in no order.
func (tt *topicTable) list() []*Topic {
	out := make([]*Topic, 0, tt.n)
	for _, t := range tt.base.byID {
		out = append(out, t)
	}
	for _, t := range tt.recent.byID {
		out = append(out, t)
	}
	return out
}

func (tt *topicTable) topic(name TopicName) *Topic {
	if t := tt.recent.byName[name]; t != nil {
		return t
	}
	return tt.base.byName[name]
}

func (tt *topicTable) topicByID(id TopicID) *Topic {
	if t := tt.recent.byID[id]; t != nil {
		return t
	}
	return tt.base.byID[id]
}

// route returns the topic whose filters capture subject, or nil (see
// Broker.Route). It does not allocate.
func (tt *topicTable) route(subject string) *Topic {
	if t := tt.recent.exact[subject]; t != nil {
		return t
	}
	if t := tt.base.exact[subject]; t != nil {
		return t
	}
	reserved := wire.IsReserved(subject)
	for _, w := range tt.wild {
		if wire.IsReserved(w.t.name) == reserved && subjectMatches(w.filter, subject) {
			return w.t
		}
	}
	return nil
}

// overlaps returns ErrOverlap (wrapped, naming both filters) if one of
// subjects overlaps a filter of a topic in the same space as name (the
// "$" space or the other). An exact filter is checked against the exact
// filters by a lookup and against the wildcard ones; only a new wildcard
// filter is checked against every topic.
func (tt *topicTable) overlaps(name TopicName, subjects []string) error {
	reserved := wire.IsReserved(name)
	conflict := func(g string, t *Topic, f string) error {
		return fmt.Errorf("%w: %q overlaps %q of topic %s", ErrOverlap, g, f, t.name)
	}
	for _, g := range subjects {
		if strings.ContainsAny(g, "*>") {
			for _, m := range []routeMaps{tt.base, tt.recent} {
				for f, t := range m.exact {
					if wire.IsReserved(t.name) == reserved && filtersOverlap(f, g) {
						return conflict(g, t, f)
					}
				}
			}
		} else {
			for _, m := range []routeMaps{tt.base, tt.recent} {
				if t := m.exact[g]; t != nil && wire.IsReserved(t.name) == reserved {
					return conflict(g, t, g)
				}
			}
		}
		for _, w := range tt.wild {
			if wire.IsReserved(w.t.name) == reserved && filtersOverlap(w.filter, g) {
				return conflict(g, w.t, w.filter)
			}
		}
	}
	return nil
}
