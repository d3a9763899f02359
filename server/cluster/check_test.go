package cluster

import (
	"encoding/json"
	"fmt"
	"sort"
)

// testSM is a state machine that records what it applied, and notes any
// index applied out of order, twice or skipped, any proposal applied
// twice, and any restore that would take its state back.
type testSM struct {
	byIndex  map[uint64]string
	seen     map[string]uint64 // data -> index, to find a double apply
	fresh    []uint64          // indexes applied since the last check
	last     uint64            // the last index applied
	applied  uint64            // the replica's applied index, set by the test before check
	restores int               // Restore calls
	bad      error
}

func newTestSM() *testSM {
	return &testSM{byIndex: map[uint64]string{}, seen: map[string]uint64{}}
}

// Applied is the index the state machine holds: 0 for a new one.
func (m *testSM) Applied() uint64 { return m.last }

func (m *testSM) Apply(index uint64, data []byte) error {
	if index != m.last+1 && m.bad == nil {
		m.bad = fmt.Errorf("entry %d applied after %d", index, m.last)
	}
	m.last = index
	if len(data) == 0 {
		return nil
	}
	if i, ok := m.seen[string(data)]; ok && m.bad == nil {
		m.bad = fmt.Errorf("%q applied twice, at %d and %d", data, i, index)
	}
	m.byIndex[index] = string(data)
	m.seen[string(data)] = index
	m.fresh = append(m.fresh, index)
	return nil
}

func (m *testSM) Snapshot() ([]byte, error) {
	return json.Marshal(m.byIndex)
}

func (m *testSM) Restore(index uint64, data []byte) error {
	if index < m.last && m.bad == nil {
		m.bad = fmt.Errorf("restore to %d takes back applied entries up to %d", index, m.last)
	}
	m.restores++
	m.byIndex = map[uint64]string{}
	m.seen = map[string]uint64{}
	m.fresh = m.fresh[:0]
	m.last = index
	if len(data) > 0 {
		if err := json.Unmarshal(data, &m.byIndex); err != nil {
			return err
		}
	}
	for i, p := range m.byIndex {
		m.seen[p] = i
		m.fresh = append(m.fresh, i)
	}
	return nil
}

// history is what a run has seen: the proposals that succeeded and every
// (index, data) any replica ever applied.
type history struct {
	acked  map[string]uint64
	global map[uint64]string
}

func newHistory() *history {
	return &history{acked: map[string]uint64{}, global: map[uint64]string{}}
}

// check verifies the invariants over the state machines of the replicas
// now up: nothing applied twice or out of order; no two different entries
// at one index, now or ever; every acknowledged proposal is, at its index,
// in every replica that has applied that far.
func (h *history) check(sms map[uint64]*testSM) error {
	ids := make([]uint64, 0, len(sms))
	for id := range sms {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		sm := sms[id]
		if sm.bad != nil {
			return fmt.Errorf("node %d: %w", id, sm.bad)
		}
		for _, i := range sm.fresh {
			p := sm.byIndex[i]
			if q, ok := h.global[i]; ok && q != p {
				return fmt.Errorf("node %d applied %q at %d where %q was applied", id, p, i, q)
			}
			h.global[i] = p
		}
		sm.fresh = sm.fresh[:0]
	}
	for p, i := range h.acked {
		if q, ok := h.global[i]; ok && q != p {
			return fmt.Errorf("acked %q at %d, but %q was applied there", p, i, q)
		}
		for _, id := range ids {
			sm := sms[id]
			if sm.applied >= i && sm.byIndex[i] != p {
				return fmt.Errorf("acked %q at %d missing on node %d (applied to %d, holds %q)", p, i, id, sm.applied, sm.byIndex[i])
			}
		}
	}
	return nil
}
