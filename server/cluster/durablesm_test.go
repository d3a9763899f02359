package cluster

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/fibrilmq/fibril/server/seglog"
)

// durableSM is a testSM whose state lives in a seglog log of its own, as
// a partition's lives in its segment files: each Apply appends a record
// (synced only every syncEvery records, so a crash loses a tail), each
// Restore appends the snapshot, and open replays the records that
// survived. Applied then reports the last index they reach.
type durableSM struct {
	*testSM
	log       *seglog.Log
	syncEvery int
	n         int
	resumedAt uint64 // what Applied reported at open
}

const (
	smApply   byte = 'a' // meta: kind, index; data: the proposal
	smRestore byte = 'r' // meta: kind, index; data: the snapshot
)

func openDurableSM(dir string, fsys seglog.FS, syncEvery int) (*durableSM, error) {
	l, err := seglog.Open(dir, seglog.Options{Policy: seglog.PolicyNone, FS: fsys, SegmentSize: 1 << 20})
	if err != nil {
		return nil, fmt.Errorf("open state machine log %s: %w", dir, err)
	}
	m := &durableSM{testSM: newTestSM(), log: l, syncEvery: syncEvery}
	first, _ := l.Bounds()
	var rerr error
	err = l.Scan(first, 0, func(r seglog.Record) bool {
		if len(r.Meta) != 9 {
			rerr = fmt.Errorf("state machine record %d: meta of %d bytes", r.Seq, len(r.Meta))
			return false
		}
		idx := binary.LittleEndian.Uint64(r.Meta[1:])
		switch r.Meta[0] {
		case smApply:
			rerr = m.testSM.Apply(idx, r.Data)
		case smRestore:
			rerr = m.testSM.Restore(idx, r.Data)
		}
		return rerr == nil
	})
	if err == nil {
		err = rerr
	}
	if err == nil {
		err = m.bad
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("replay state machine log %s: %w", dir, err)
	}
	m.resumedAt = m.last
	return m, nil
}

func (m *durableSM) write(kind byte, index uint64, data []byte) error {
	meta := make([]byte, 9)
	meta[0] = kind
	binary.LittleEndian.PutUint64(meta[1:], index)
	if _, err := m.log.Append([]seglog.Entry{{Meta: meta, Data: data}}); err != nil {
		return err
	}
	if m.n++; m.n%m.syncEvery == 0 {
		_, err := m.log.Sync()
		return err
	}
	return nil
}

func (m *durableSM) Apply(index uint64, data []byte) error {
	if err := m.testSM.Apply(index, data); err != nil {
		return err
	}
	return m.write(smApply, index, data)
}

func (m *durableSM) Restore(index uint64, data []byte) error {
	if err := m.testSM.Restore(index, data); err != nil {
		return err
	}
	b, err := json.Marshal(m.byIndex) // the state as restored, for replay
	if err != nil {
		return err
	}
	return m.write(smRestore, index, b)
}

// aheadSM claims an applied index no raft log of a new group reaches.
type aheadSM struct{ testSM }

func (*aheadSM) Applied() uint64 { return 100 }

// TestOpenRefusesStateMachineAheadOfLog: a state machine that claims
// entries the raft log never held (a directory from another group, or a
// lost raft log) is refused at open, not silently resumed past them.
func TestOpenRefusesStateMachineAheadOfLog(t *testing.T) {
	sm := &aheadSM{*newTestSM()}
	r, err := newReplica(Config{ID: 1, Peers: []uint64{1}, Dir: t.TempDir()}, sm, simLink{&simNet{}})
	if err == nil {
		r.close(true)
		t.Fatal("open succeeded with the state machine at 100 and an empty raft log")
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
}
