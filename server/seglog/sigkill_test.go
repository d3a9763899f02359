package seglog

import (
	"bufio"
	"bytes"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The SIGKILL test re-executes the test binary as a child that appends to a
// log and prints every durable point it was told; the parent kills it with
// SIGKILL at a random moment, reopens the log and checks that every record
// reported durable is there, intact and in order, and nothing is invented.

const (
	childDirEnv    = "SEGLOG_SIGKILL_DIR"
	childPolicyEnv = "SEGLOG_SIGKILL_POLICY"
	childCompEnv   = "SEGLOG_SIGKILL_COMPRESSION"
)

// selfCheckingEntry returns an entry whose Data is derived from its Meta,
// so a record can be checked without knowing who wrote it.
func selfCheckingEntry(meta string) Entry {
	h := fnv.New64a()
	h.Write([]byte(meta))
	rng := rand.New(rand.NewPCG(h.Sum64(), 7))
	// Words drawn at random: compressible by s2 and zstd, never zero.
	words := []string{"order ", "paid ", "shipped ", "eu-west ", "customer ", "qty ", "sku ", "status "}
	n := 64 + rng.IntN(960)
	data := make([]byte, 0, n+16)
	for len(data) < n {
		data = append(data, words[rng.IntN(len(words))]...)
	}
	return Entry{Meta: []byte(meta), Data: data, Time: int64(h.Sum64() >> 2)}
}

// TestSigkillChild is the child's body; it does nothing in a normal run.
func TestSigkillChild(t *testing.T) {
	dir := os.Getenv(childDirEnv)
	if dir == "" {
		t.Skip("only runs as the child of TestSigkill")
	}
	p, err := ParsePolicy(os.Getenv(childPolicyEnv))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseCompression(os.Getenv(childCompEnv))
	if err != nil {
		t.Fatal(err)
	}
	size := int64(256 << 10)
	if c != CompressionNone {
		size = 16 << 10 // many sealed segments to compress before the kill
	}
	l, err := Open(dir, Options{Policy: p, SegmentSize: size, Compression: c})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	var out sync.Mutex
	report := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		os.Stdout.WriteString(fmt.Sprintf(format, args...) + "\n")
	}
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				batch := make([]Entry, 1+i%16)
				for j := range batch {
					batch[j] = selfCheckingEntry(fmt.Sprintf("w%d-%d-%d", w, i, j))
				}
				first, err := l.Append(batch)
				if err != nil {
					report("ERR %v", err)
					return
				}
				if p == PolicySync {
					report("D %d", first+Seq(len(batch))-1)
				} else if i%2 == 0 {
					d, err := l.Sync()
					if err != nil {
						report("ERR %v", err)
						return
					}
					report("D %d", d)
				}
			}
		}()
	}
	wg.Wait()
	os.Exit(1)
}

func TestSigkill(t *testing.T) {
	if os.Getenv(childDirEnv) != "" {
		t.Skip("child")
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for _, p := range []Policy{PolicySync, PolicyCaller, PolicyNone} {
		for round := 0; round < 2; round++ {
			lines := rng.IntN(60) + 1
			t.Run(fmt.Sprintf("%s/%d", p, round), func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				var durable Seq
				// The child compresses sealed segments in a third of the runs.
				c := []Compression{CompressionNone, CompressionS2, CompressionZstd}[(int(p)+round)%3]
				for kill := 0; kill < 2; kill++ { // kill twice: recovery of a recovered log
					durable = max(durable, runAndKill(t, dir, p, c, lines+kill*10))
					l, err := Open(dir, Options{Policy: p, SegmentSize: 256 << 10, Compression: c})
					if err != nil {
						t.Fatalf("open after SIGKILL: %v", err)
					}
					checkSelfChecking(t, l, durable)
					if c != CompressionNone && len(l.Segments()) > 1 {
						// The next child starts from a compressed log.
						waitFor(t, "compression", func() bool { return allSealedCompressed(l) })
						checkSelfChecking(t, l, durable)
					}
					nc := 0
					for _, s := range l.Segments() {
						if s.Compressed {
							nc++
						}
					}
					t.Logf("kill %d (%s): %d of %d segments compressed", kill, c, nc, len(l.Segments()))
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
}

// runAndKill starts a child appending to dir, lets it report lines durable
// points, kills it with SIGKILL and returns the highest durable point read.
func runAndKill(t *testing.T, dir string, p Policy, c Compression, lines int) Seq {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSigkillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childDirEnv+"="+dir, childPolicyEnv+"="+p.String(), childCompEnv+"="+c.String())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var durable Seq
	sc := bufio.NewScanner(stdout)
	for n := 0; n < lines && sc.Scan(); n++ {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "D "); ok {
			d, err := strconv.ParseUint(rest, 10, 64)
			if err != nil {
				t.Fatalf("child said %q", line)
			}
			durable = max(durable, Seq(d))
		} else if strings.HasPrefix(line, "ERR") {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child failed: %s", line)
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait() // "signal: killed" is the expected outcome
	if durable == 0 {
		t.Fatal("child reported nothing durable")
	}
	return durable
}

// checkSelfChecking verifies that every record up to durable is present and
// that every record present is a self-checking entry, in order.
func checkSelfChecking(t *testing.T, l *Log, durable Seq) {
	t.Helper()
	first, last := l.Bounds()
	if first != 1 || last < durable {
		t.Fatalf("bounds %d,%d after SIGKILL; %d was reported durable", first, last, durable)
	}
	next := Seq(1)
	err := l.Scan(1, 0, func(r Record) bool {
		if r.Seq != next {
			t.Fatalf("seq %d, want %d", r.Seq, next)
		}
		next++
		want := selfCheckingEntry(string(r.Meta))
		if !bytes.Equal(r.Data, want.Data) || r.Time != want.Time {
			t.Fatalf("record %d (meta %q) is not what was appended", r.Seq, r.Meta)
		}
		return true
	})
	if err != nil || next != last+1 {
		t.Fatalf("scan: %v, ended at %d, last %d", err, next, last)
	}
}
