package replog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/fibrilmq/fibril/server/seglog"
)

// newLocalPair is a Pair with its local logs and no group: the state
// machine alone, for table tests of Apply.
func newLocalPair(t *testing.T, dir string) *Pair {
	t.Helper()
	p := &Pair{dir: dir, cfg: Config{MarkEvery: 1000}, id: 1, open: 2}
	p.cond = sync.NewCond(&p.mu)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.cancel() // no group: a restore from a peer stops at once
	m, ok, err := readMark(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		m = mark{nextData: 1, nextEv: 1}
	}
	p.applied, p.stateAt = m.index, m.stateAt
	for _, x := range []struct {
		l    **Log
		name string
		tag  byte
		next seglog.Seq
	}{{&p.data, "data", tagData, m.nextData}, {&p.events, "events", tagEvents, m.nextEv}} {
		local, err := seglog.Open(filepath.Join(dir, x.name), seglog.Options{Policy: seglog.PolicyCaller, SegmentSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		*x.l = &Log{p: p, tag: x.tag, applyNext: x.next}
		(*x.l).local.Store(local)
	}
	t.Cleanup(func() { p.closeLocal() })
	return p
}

func recs(n int, tag string) []seglog.Entry {
	es := make([]seglog.Entry, n)
	for i := range es {
		es[i] = seglog.Entry{Meta: []byte("m"), Data: []byte(fmt.Sprintf("%s%d", tag, i))}
	}
	return es
}

func recEntry(tag byte, epoch uint64, first seglog.Seq, es []seglog.Entry) []byte {
	return appendRecords(header(nil, tag, 1, epoch), first, es, 7)
}

func readAll(t *testing.T, s seglog.Store) []string {
	t.Helper()
	var out []string
	first, last := s.Bounds()
	for seq := first; seq <= last; seq++ {
		r, err := s.Read(seq)
		if err != nil {
			t.Fatalf("read %d: %v", seq, err)
		}
		out = append(out, string(r.Data))
	}
	return out
}

// TestApply: the state machine's rules, one entry sequence each.
func TestApply(t *testing.T) {
	a3, b2 := recs(3, "a"), recs(2, "b")
	cases := []struct {
		name    string
		entries [][]byte
		wantErr error
		data    []string // the local data log after
		next    seglog.Seq
	}{
		{"in order", [][]byte{recEntry(tagData, 1, 1, a3), recEntry(tagData, 1, 4, b2)}, nil, []string{"a0", "a1", "a2", "b0", "b1"}, 6},
		{"stale entry skipped", [][]byte{recEntry(tagData, 1, 1, a3), recEntry(tagData, 1, 6, b2), recEntry(tagData, 2, 4, b2)}, nil,
			[]string{"a0", "a1", "a2", "b0", "b1"}, 6},
		{"old seqs skipped", [][]byte{recEntry(tagData, 1, 1, a3), recEntry(tagData, 1, 2, b2)}, nil, []string{"a0", "a1", "a2"}, 4},
		{"events apart", [][]byte{recEntry(tagEvents, 1, 1, a3), recEntry(tagData, 1, 1, b2)}, nil, []string{"b0", "b1"}, 3},
		{"bad entry", [][]byte{{tagData, 1}}, ErrCorrupt, nil, 1},
		{"unknown tag", [][]byte{header(nil, 99, 1, 1)}, ErrCorrupt, nil, 1},
		{"state name outside", [][]byte{append(appendUvarint(header(nil, tagState, 1, 1), 5), "../xx"...)}, ErrCorrupt, nil, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newLocalPair(t, t.TempDir())
			var err error
			for i, e := range tc.entries {
				if err = p.Apply(uint64(i+2), e); err != nil {
					break
				}
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("got %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, p.data.loc()); fmt.Sprint(got) != fmt.Sprint(tc.data) {
				t.Fatalf("data log %v, want %v", got, tc.data)
			}
			if p.data.applyNext != tc.next {
				t.Fatalf("next data seq %d, want %d", p.data.applyNext, tc.next)
			}
		})
	}
}

// TestApplyReplay: after a restart from an older mark, raft replays the
// entries after it: the records the local log holds are skipped, the
// rest written, and the logs end as if applied once.
func TestApplyReplay(t *testing.T) {
	dir := t.TempDir()
	p := newLocalPair(t, dir)
	es := [][]byte{recEntry(tagData, 1, 1, recs(3, "a")), recEntry(tagData, 1, 4, recs(2, "b")), recEntry(tagData, 1, 6, recs(2, "c"))}
	if err := p.Apply(1, es[0]); err != nil {
		t.Fatal(err)
	}
	if err := p.writeMark(); err != nil { // the mark covers entry 1
		t.Fatal(err)
	}
	for i, e := range es[1:] {
		if err := p.Apply(uint64(i+2), e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.data.loc().Sync(); err != nil {
		t.Fatal(err)
	}
	p.closeLocal()
	q := newLocalPair(t, dir)
	if q.Applied() != 1 {
		t.Fatalf("applied %d after reopen, want the mark's 1", q.Applied())
	}
	for i, e := range es[1:] { // raft replays after the mark
		if err := q.Apply(uint64(i+2), e); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"a0", "a1", "a2", "b0", "b1", "c0", "c1"}
	if got := readAll(t, q.data.loc()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after replay %v, want %v", got, want)
	}
}

// TestApplyGapRefused: a local log that lost records its entries need
// (an entry follows the applied seqs, but the log ends before it) is
// ErrCorrupt, and nothing is truncated or written.
func TestApplyGapRefused(t *testing.T) {
	p := newLocalPair(t, t.TempDir())
	p.data.applyNext = 4 // as a mark would say after records 1-3
	err := p.Apply(1, recEntry(tagData, 1, 4, recs(2, "b")))
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
	if _, last := p.data.loc().Bounds(); last != 0 {
		t.Fatalf("the local log got records up to %d", last)
	}
}

// TestOpenRefusesShortLog: a mark past what a local log holds (records
// lost) and records without a mark (a log that was never replicated)
// refuse the Open.
func TestOpenRefusesShortLog(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{"mark past the log", func(t *testing.T, dir string) {
			if err := writeFileAtomic(dir, appliedName, encodeMark(mark{index: 5, nextData: 10, nextEv: 1})); err != nil {
				t.Fatal(err)
			}
		}},
		{"records without a mark", func(t *testing.T, dir string) {
			l, err := seglog.Open(filepath.Join(dir, "data"), seglog.Options{SegmentSize: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Append(recs(1, "x")); err != nil {
				t.Fatal(err)
			}
			l.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			_, err := Open(dir, Config{Group: testGroupCfg(1, []uint64{1})})
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestApplyStateAndTruncate: a state entry writes its file atomically
// and forces the mark (never applied again after a restart); a
// truncation entry truncates the local log.
func TestApplyStateAndTruncate(t *testing.T) {
	dir := t.TempDir()
	p := newLocalPair(t, dir)
	if err := p.Apply(1, recEntry(tagEvents, 1, 1, recs(3, "e"))); err != nil {
		t.Fatal(err)
	}
	st := append(appendUvarint(header(nil, tagState, 1, 1), uint64(len("state.snap"))), "state.snap"...)
	st = append(st, "STATE"...)
	if err := p.Apply(2, st); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "state.snap")); err != nil || string(b) != "STATE" {
		t.Fatalf("state file: %q, %v", b, err)
	}
	m, ok, err := readMark(dir)
	if err != nil || !ok || m.index != 2 || m.stateAt != 2 || m.nextEv != 4 {
		t.Fatalf("mark after the state entry: %+v %v %v", m, ok, err)
	}
	if err := p.Apply(3, appendUvarint(header(nil, tagTruncEvents, 1, 1), 3)); err != nil {
		t.Fatal(err)
	}
	if first, _ := p.events.loc().Bounds(); first > 3 {
		t.Fatalf("truncation dropped records at or above 3: first %d", first)
	}
}

// TestRestore: a snapshot describing what the replica holds, or less
// than it holds, is taken by moving the mark; one past it (records or a
// state file this replica lacks) needs a restore from a peer (which,
// with no group, stops at once and moves nothing).
func TestRestore(t *testing.T) {
	cases := []struct {
		name string
		m    mark
		want error
	}{
		{"holds it all", mark{index: 9, nextData: 4, nextEv: 1}, nil},
		{"holds more", mark{index: 9, nextData: 3, nextEv: 1}, nil},
		{"records missing", mark{index: 9, nextData: 8, nextEv: 1}, errRestoreStopped},
		{"state missing", mark{index: 9, nextData: 4, nextEv: 1, stateAt: 7}, errRestoreStopped},
		{"garbage", mark{}, ErrCorrupt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newLocalPair(t, t.TempDir())
			if err := p.Apply(1, recEntry(tagData, 1, 1, recs(3, "a"))); err != nil {
				t.Fatal(err)
			}
			data := encodeMark(tc.m)
			if tc.m.index == 0 {
				data = []byte("nope")
			}
			err := p.Restore(tc.m.index, data)
			if !errors.Is(err, tc.want) && !(tc.want == nil && err == nil) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if tc.want == nil && (p.Applied() != tc.m.index || p.data.applyNext != tc.m.nextData) {
				t.Fatalf("applied %d, next data seq %d after restore, want %d, %d", p.Applied(), p.data.applyNext, tc.m.index, tc.m.nextData)
			}
			if tc.want != nil && p.Applied() != 1 {
				t.Fatalf("applied %d after a failed restore, want 1", p.Applied())
			}
		})
	}
}

// TestEntryRoundTrip: every tag decodes to what was encoded; a cut one
// is ErrCorrupt.
func TestEntryRoundTrip(t *testing.T) {
	es := recs(3, "r")
	b := recEntry(tagData, 4, 10, es)
	e, err := decodeEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	if e.proposer != 1 || e.epoch != 4 || e.first != 10 || len(e.recs) != 3 || string(e.recs[2].Data) != "r2" || e.recs[2].Seq != 12 || e.recs[0].Time != 7 {
		t.Fatalf("decoded %+v", e)
	}
	for cut := 1; cut < len(b); cut++ {
		if _, err := decodeEntry(b[:cut]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d: %v, want ErrCorrupt", cut, err)
		}
	}
}
