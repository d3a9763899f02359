package clusterkill

import "sync"

// monitor is what the kill loop learns from the load: which node last
// served each partition (the leader, since a POLL is served only where the
// partition is led), and, after a kill, when service resumed.
type monitor struct {
	mu     sync.Mutex
	served map[int]sighting // partition -> last delivery from it

	part          int   // the partition whose leader was killed
	killAt        int64 // unix ns of the kill; 0: not armed
	pubAt, pollAt int64 // first confirm / delivery of part from a request sent after killAt (0: not yet)
}

type sighting struct {
	node int
	at   int64 // when the poll that brought it was answered
}

func newMonitor() *monitor { return &monitor{served: map[int]sighting{}} }

// arm starts watching for service of part to resume after killAt.
func (m *monitor) arm(part int, killAt int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.part, m.killAt, m.pubAt, m.pollAt = part, killAt, 0, 0
}

// confirmed notes a publish to part sent at invoke and confirmed at complete.
func (m *monitor) confirmed(part int, invoke, complete int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.killAt > 0 && part == m.part && invoke > m.killAt && m.pubAt == 0 {
		m.pubAt = complete
	}
}

// delivered notes that node served a poll (sent at invoke, answered at
// complete) with messages of part.
func (m *monitor) delivered(node, part int, invoke, complete int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.served[part] = sighting{node, complete}
	if m.killAt > 0 && part == m.part && invoke > m.killAt && m.pollAt == 0 {
		m.pollAt = complete
	}
}

// resumed returns when a publish to the watched partition was confirmed
// and a poll served from it after the kill (0: not yet).
func (m *monitor) resumed() (pub, poll int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pubAt, m.pollAt
}

// leader returns the node that last served part, if it did after t.
func (m *monitor) leader(part int, t int64) (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.served[part]
	if !ok || s.at <= t {
		return 0, false
	}
	return s.node, true
}

// servedSince reports whether a poll of part was served after t (the
// partition has a leader serving it again).
func (m *monitor) servedSince(part int, t int64) bool {
	_, ok := m.leader(part, t)
	return ok
}
