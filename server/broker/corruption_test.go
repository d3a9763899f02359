package broker

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/seglog"
)

// The corruption suite: a stopped broker's data directory (closed cleanly,
// or as a killed process leaves it) is damaged on purpose, one file and
// one damage per run (bit flips, zeroed 4 KiB
// blocks, truncations, deleted files, garbage after the end, catalog key
// edits) over every kind of file (data and event segments, plain and
// compressed, their indexes, CLEAN markers and LOCK files, snapshots, the
// catalog, its previous copy, topic.json). Each run must end in one of two
// ways, never in between:
//
//   - refused: Open fails with a damage error naming the file (or its log
//     directory); fibril verify (Verify) found it; fibril repair (Repair)
//     brings the directory back, and the losses it lists are exactly the
//     messages whose records are unreadable that each group had not
//     settled; every other confirmed, un-acked message is delivered;
//   - started: every confirmed, un-acked message is delivered intact and no
//     group is stopped at damage.
//
// Verify must find every damage that has an effect. The short form runs in
// `make test`; FIBRIL_CORRUPTION_RUNS=N (make test-corruption) the long one.

// corruptBase is a stopped broker's data directory and what it confirmed.
type corruptBase struct {
	dir   string
	opts  Options
	msgs  map[string]map[Position]string      // topic → position → payload
	acked map[string]map[GroupName][]Position // topic → group → acked before the stop
}

// corruptGroups: the groups of each topic of the suite.
var corruptGroups = map[string][]GroupName{"t1": {"a", "b"}, "t2": {"c"}}

func corruptOpts(dir string) Options {
	return Options{Logf: func(string, ...any) {}, RetentionInterval: time.Millisecond,
		SegmentSize: 64 << 10, EventSegmentSize: 8 << 10, SnapshotEvery: 60}
}

// buildCorruptBase publishes and settles a random workload: topic t1 (two
// partitions, groups a and b), topic t2 (s2 compressed, group c).
// With unclean, the base is an image of the directory taken while the
// broker runs (its actors held still), as a killed process leaves it: no
// clean-shutdown markers, indexes of active segments possibly stale.
func buildCorruptBase(t *testing.T, seed uint64, unclean bool) *corruptBase {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 34))
	base := &corruptBase{dir: t.TempDir(), msgs: map[string]map[Position]string{}, acked: map[string]map[GroupName][]Position{}}
	base.opts = corruptOpts(base.dir)
	b, err := Open(base.dir, base.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for name, groups := range corruptGroups {
		cfg := TopicConfig{Partitions: 2}
		if name == "t2" {
			cfg = TopicConfig{Partitions: 1, Compression: CompressionS2}
		}
		tp, err := b.CreateTopic(TopicName(name), cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			if _, err := tp.Group(g, GroupConfig{DeadLetter: "-", MaxDeliveries: -1}); err != nil {
				t.Fatal(err)
			}
		}
		n := 250 + rng.IntN(150)
		payloads := make([]string, n)
		for i := range payloads {
			payloads[i] = fmt.Sprintf("%s-%d-%s", name, i, strings.Repeat(string(rune('a'+rng.IntN(26))), 100+rng.IntN(700)))
		}
		base.msgs[name] = map[Position]string{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += 8 {
					pos, err := tp.Publish(ctx, Message{Subject: name, Data: []byte(payloads[i])})
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					base.msgs[name][pos] = payloads[i]
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		base.acked[name] = map[GroupName][]Position{}
		for _, gname := range groups[:1] { // the first group settles some
			g, _ := tp.FindGroup(gname)
			for range 1 + rng.IntN(4) {
				ds, err := g.Poll(ctx, 100)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range ds {
					op := Ack()
					if rng.IntN(5) == 0 {
						op = Nack(0)
					}
					if err := b.settleWait(ctx, d.Handle, op); err != nil {
						t.Fatal(err)
					}
					if op.Kind == SettleAck {
						base.acked[name][gname] = append(base.acked[name][gname], Position{Partition: d.Handle.Partition, Seq: d.Handle.Seq})
					}
				}
			}
		}
	}
	if tp, ok := b.Topic("t2"); ok { // let the compressor take the sealed segments
		deadline := time.Now().Add(10 * time.Second)
		for _, p := range tp.parts {
			for time.Now().Before(deadline) {
				segs := p.data.(*seglog.Log).Segments()
				if len(segs) < 2 || segs[len(segs)-2].Compressed {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	if unclean {
		image := t.TempDir()
		release := make(chan struct{})
		held := make(chan struct{})
		n := 0
		for _, tp := range b.Topics() {
			for _, p := range tp.parts {
				n++
				p.control(func(*partition) {
					held <- struct{}{}
					<-release
				})
			}
		}
		for range n {
			<-held
		}
		copyTree(t, base.dir, image)
		close(release)
		base.dir = image
	}
	return base
}

// copyTree copies the directory src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(to)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// damageKinds and what they do to a file of size n (rng picks where).
var damageKinds = []string{"flip", "zero4k", "truncate", "delete", "garbage", "catalog-key"}

// applyDamage damages path and returns a description; "" when the kind
// does not apply to this file.
func applyDamage(t *testing.T, rng *rand.Rand, path, kind string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	used := usedLen(path, b)
	switch kind {
	case "flip":
		if used == 0 {
			return ""
		}
		off := rng.IntN(used)
		b[off] ^= 1 << rng.IntN(8)
		writeDamaged(t, path, b)
		return fmt.Sprintf("flip at %d", off)
	case "zero4k":
		if used == 0 {
			return ""
		}
		off := rng.IntN(used) &^ 4095
		end := min(off+4096, len(b))
		clear(b[off:end])
		writeDamaged(t, path, b)
		return fmt.Sprintf("zero [%d, %d)", off, end)
	case "truncate":
		if used == 0 {
			return ""
		}
		n := rng.IntN(used)
		b = b[:n]
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("truncate to %d", n)
	case "delete":
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		return "delete"
	case "garbage":
		g := make([]byte, 1+rng.IntN(4096))
		for i := range g {
			g[i] = byte(rng.IntN(256))
		}
		b = append(b, g...)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d bytes appended", len(g))
	case "catalog-key":
		base := filepath.Base(path)
		if base != catalogName && base != catalogPrevName && base != topicRecordName {
			return ""
		}
		edits := [][2]string{{`"id"`, `"it"`}, {`"lease_ms"`, `"leese_ms"`}, {`"next_topic_id"`, `"next_topik_id"`}, {`"partitions"`, `"partition"`}}
		e := edits[rng.IntN(len(edits))]
		s := strings.Replace(string(b), e[0], e[1], 1)
		if s == string(b) {
			return ""
		}
		b = []byte(s)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return "key " + e[0] + " → " + e[1]
	}
	return ""
}

// writeDamaged writes b over path in place (same inode, as a disk fault
// would).
func writeDamaged(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
}

// usedLen is how much of a file holds data: for a plain segment the bytes
// up to the end of its records (past it lies preallocated zero space).
func usedLen(path string, b []byte) int {
	if !strings.HasSuffix(path, ".seg") {
		return len(b)
	}
	end := 32
	for end+32 <= len(b) {
		h := b[end : end+32]
		allZero := true
		for _, c := range h {
			if c != 0 {
				allZero = false
				break
			}
		}
		if allZero {
			break
		}
		dataLen := int(uint32(h[4]) | uint32(h[5])<<8 | uint32(h[6])<<16 | uint32(h[7])<<24)
		metaLen := int(uint16(h[26]) | uint16(h[27])<<8)
		size := (32 + metaLen + dataLen + 7) &^ 7
		if size <= 0 || end+size > len(b) {
			break
		}
		end += size
	}
	return end
}

// corruptResult counts outcomes over runs.
type corruptResult struct {
	mu                               sync.Mutex
	runs, refused, started, noEffect int
	found, repaired                  int
	failures, quiet                  []string
	byKind                           map[string]int
}

func (r *corruptResult) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

// drain polls every group of the suite until nothing is ready and returns
// what each delivered (without settling: leases outlast the run).
func drain(t *testing.T, b *Broker) map[string]map[GroupName]map[Position]string {
	t.Helper()
	out := map[string]map[GroupName]map[Position]string{}
	for name, groups := range corruptGroups {
		out[name] = map[GroupName]map[Position]string{}
		tp, ok := b.Topic(TopicName(name))
		if !ok {
			continue
		}
		for _, gname := range groups {
			got := map[Position]string{}
			out[name][gname] = got
			g, ok := tp.FindGroup(gname)
			if !ok {
				continue
			}
			for range 100 {
				ch := make(chan []Delivery, 1)
				if err := g.PollAsync(500, 0, 1, func(ds []Delivery, err error) {
					out := make([]Delivery, len(ds))
					for i := range ds {
						out[i] = ds[i].clone()
					}
					ch <- out
				}); err != nil {
					t.Fatal(err)
				}
				ds := <-ch
				if len(ds) == 0 {
					break
				}
				for _, d := range ds {
					got[Position{Partition: d.Handle.Partition, Seq: d.Handle.Seq}] = string(d.Data)
				}
			}
		}
	}
	return out
}

// checkDelivered compares what each group delivered with the model: every
// confirmed message not acked before the stop and not in lost must be
// there, intact. It returns what is missing or wrong.
func checkDelivered(base *corruptBase, got map[string]map[GroupName]map[Position]string, lost map[string]map[GroupName]map[Position]bool) []string {
	var bad []string
	for name, groups := range corruptGroups {
		for _, gname := range groups {
			acked := map[Position]bool{}
			for _, p := range base.acked[name][gname] {
				acked[p] = true
			}
			for pos, want := range base.msgs[name] {
				if acked[pos] || lost[name][gname][pos] {
					continue
				}
				have, ok := got[name][gname][pos]
				if !ok {
					bad = append(bad, fmt.Sprintf("%s/%s %v missing", name, gname, pos))
				} else if have != want {
					bad = append(bad, fmt.Sprintf("%s/%s %v damaged: %q", name, gname, pos, have))
				}
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// unreadable lists the messages of the model whose records the damaged
// directory cannot return (read-only, skipping damage).
func unreadable(t *testing.T, dir string, base *corruptBase) map[string]map[Position]bool {
	t.Helper()
	out := map[string]map[Position]bool{}
	ids := map[string]TopicID{"t1": 0, "t2": 0}
	for name := range ids {
		out[name] = map[Position]bool{}
	}
	// Topic ids come from the base's catalog (the copy's may be damaged).
	c, _, err := loadCatalog(base.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ct := range c.Topics {
		for p := 0; p < ct.Config.Partitions; p++ {
			l, err := seglog.Open(filepath.Join(topicDirOf(dir, ct.ID), strconv.Itoa(p), dataLogName),
				seglog.Options{ReadOnly: true, SkipCorrupt: true, Verify: true, SegmentSize: base.opts.SegmentSize})
			for pos := range base.msgs[string(ct.Name)] {
				if pos.Partition != Partition(p) {
					continue
				}
				if err != nil {
					out[string(ct.Name)][pos] = true
					continue
				}
				if r, rerr := l.Read(pos.Seq); rerr != nil || string(r.Data) != base.msgs[string(ct.Name)][pos] {
					out[string(ct.Name)][pos] = true
				}
			}
			if err == nil {
				l.Close()
			}
		}
	}
	return out
}

// corruptRun damages a copy of base and checks the outcome.
func corruptRun(t *testing.T, base *corruptBase, files []string, seed uint64, res *corruptResult) {
	rng := rand.New(rand.NewPCG(seed, 1034))
	dir := t.TempDir()
	copyTree(t, base.dir, dir)
	var rel, kind, what string
	for range 50 {
		rel = files[rng.IntN(len(files))]
		kind = damageKinds[rng.IntN(len(damageKinds))]
		if what = applyDamage(t, rng, filepath.Join(dir, rel), kind); what != "" {
			break
		}
	}
	if what == "" {
		return
	}
	label := fmt.Sprintf("seed %d: %s %s (%s)", seed, rel, kind, what)
	res.mu.Lock()
	res.runs++
	res.byKind[kind]++
	res.mu.Unlock()
	damaged := filepath.Join(dir, rel)
	opts := corruptOpts(dir)

	rep, verr := Verify(dir, opts)
	if verr != nil {
		res.fail("%s: verify: %v", label, verr)
		return
	}
	found := false
	for _, f := range rep.Findings {
		if f.Path == damaged || strings.HasPrefix(damaged, f.Path+string(os.PathSeparator)) || filepath.Dir(f.Path) == filepath.Dir(damaged) || f.Path == filepath.Dir(damaged) {
			found = true
		}
	}

	b, err := Open(dir, opts)
	if err == nil {
		got := drain(t, b)
		stopped := b.Damaged()
		b.Close()
		bad := checkDelivered(base, got, nil)
		if len(bad) > 0 || len(stopped) > 0 {
			res.fail("%s: started but %d messages missing or wrong (%v), groups stopped at damage %v", label, len(bad), head(bad), stopped)
			return
		}
		res.mu.Lock()
		res.started++
		if found {
			res.found++
		} else {
			res.noEffect++
			res.quiet = append(res.quiet, label)
		}
		res.mu.Unlock()
		return
	}
	if !IsDamage(err) || !strings.Contains(err.Error(), filepath.Dir(damaged)) && !strings.Contains(err.Error(), damaged) {
		res.fail("%s: refused without naming the file: %v", label, err)
		return
	}
	if !found || rep.Worst() <= FindingNote {
		res.fail("%s: refused (%v) but verify did not find it: %v", label, err, rep.Findings)
		return
	}
	rr, rerr := Repair(dir, RepairOptions{Engine: opts})
	if rerr != nil {
		res.fail("%s: refused (%v); repair failed: %v\n%s", label, err, rerr, strings.Join(rr.Actions, "\n"))
		return
	}
	// What the repaired directory cannot return: the records destroyed,
	// and those of files a repair had to move away whole.
	lostRecords := unreadable(t, dir, base)
	lost := map[string]map[GroupName]map[Position]bool{}
	for name, groups := range corruptGroups {
		lost[name] = map[GroupName]map[Position]bool{}
		for _, g := range groups {
			lost[name][g] = map[Position]bool{}
		}
	}
	for _, l := range rr.Losses {
		for s := l.From; s <= l.To; s++ {
			lost[string(l.Topic)][l.Group][Position{Partition: l.Partition, Seq: s}] = true
		}
	}
	// Exact: a group loses exactly the unreadable messages it had not
	// settled (acked before the stop, or delivered again only to be
	// lost: the model's acks are the settles).
	for name, groups := range corruptGroups {
		for _, g := range groups {
			acked := map[Position]bool{}
			for _, p := range base.acked[name][g] {
				acked[p] = true
			}
			for pos := range lostRecords[name] {
				if !acked[pos] && !lost[name][g][pos] {
					res.fail("%s: %s/%s %v unreadable but not listed as lost", label, name, g, pos)
					return
				}
			}
			for pos := range lost[name][g] {
				if !lostRecords[name][pos] || acked[pos] {
					res.fail("%s: %s/%s %v listed as lost but readable or settled", label, name, g, pos)
					return
				}
			}
		}
	}
	b, err = Open(dir, opts)
	if err != nil {
		res.fail("%s: repaired but refused again: %v", label, err)
		return
	}
	got := drain(t, b)
	stopped := b.Damaged()
	b.Close()
	if bad := checkDelivered(base, got, lost); len(bad) > 0 || len(stopped) > 0 {
		res.fail("%s: repaired but %d messages missing (%v), stopped %v", label, len(bad), head(bad), stopped)
		return
	}
	res.mu.Lock()
	res.refused++
	res.found++
	res.repaired++
	res.mu.Unlock()
}

func head(s []string) []string {
	if len(s) > 5 {
		return s[:5]
	}
	return s
}

// TestCorruptionSuite is the suite's entry point (see the top of the file).
func TestCorruptionSuite(t *testing.T) {
	runs := 48
	if v := os.Getenv("FIBRIL_CORRUPTION_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("FIBRIL_CORRUPTION_RUNS=%q", v)
		}
		runs = n
	} else if testing.Short() {
		runs = 12
	}
	// FIBRIL_CORRUPTION_SEED shifts every seed (workloads and damage),
	// for runs unlike the default ones.
	var shift uint64
	if v := os.Getenv("FIBRIL_CORRUPTION_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("FIBRIL_CORRUPTION_SEED=%q", v)
		}
		shift = n * 1_000_003
	}
	const bases = 4
	res := &corruptResult{byKind: map[string]int{}}
	for bi := range bases {
		base := buildCorruptBase(t, shift+uint64(bi), bi%2 == 1)
		var files []string
		filepath.WalkDir(base.dir, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(base.dir, path)
				files = append(files, rel)
			}
			return nil
		})
		sort.Strings(files)
		for i := bi; i < runs; i += bases {
			corruptRun(t, base, files, shift+uint64(i), res)
		}
	}
	t.Logf("corruption suite: %d runs (%v): %d refused (all repaired: %d), %d started intact (%d with the damage found by verify, %d with no effect); %d verify found; %d failures",
		res.runs, res.byKind, res.refused, res.repaired, res.started, res.started-res.noEffect, res.noEffect, res.found, len(res.failures))
	if os.Getenv("FIBRIL_CORRUPTION_VERBOSE") != "" {
		for _, q := range res.quiet {
			t.Logf("no effect, nothing found: %s", q)
		}
	}
	for _, f := range res.failures {
		t.Error(f)
	}
}
