package storetest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/seglog"
)

// The crash case: the parent runs the calling test again as a child
// process, with the environment below naming the directory and the test.
// The child's Run opens the store there and appends from two goroutines,
// printing "storetest-durable N" for every point the store confirmed
// durable (Append's return under DurableOnAppend, Sync's result otherwise).
// The parent reads a random number of those lines, kills the child with
// SIGKILL, reopens the store and checks that every record up to the
// highest point read is there, that every record there is one the child
// wrote, in order, and that appends go on from the last. Twice, so a
// recovered store is crashed and recovered again.
const (
	childDirEnv  = "STORETEST_CRASH_DIR"
	childTestEnv = "STORETEST_CRASH_TEST"
	durableLine  = "storetest-durable "
	errorLine    = "storetest-error "
)

// crashChild turns Run into the crash writer in the child process: it
// reports whether t is the child's (then Run must return).
func crashChild(t *testing.T, open Opener) bool {
	dir := os.Getenv(childDirEnv)
	if dir == "" {
		return false
	}
	if os.Getenv(childTestEnv) != t.Name() {
		t.Skip("storetest crash child of another test")
		return true
	}
	s := open(t, dir)
	_, last := s.Bounds()
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...)
	}
	durableOnAppend := os.Getenv(childTestEnv+"_DOA") == "1"
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				batch := make([]seglog.Entry, 1+i%9)
				for j := range batch {
					batch[j] = selfChecking(fmt.Sprintf("after-%d/w%d/%d/%d", last, w, i, j))
				}
				first, err := s.Append(batch)
				if err != nil {
					say(errorLine+"append: %v", err)
					return
				}
				switch {
				case durableOnAppend:
					say(durableLine+"%d", first+seglog.Seq(len(batch))-1)
				case i%3 == 0:
					d, err := s.Sync()
					if err != nil {
						say(errorLine+"sync: %v", err)
						return
					}
					say(durableLine+"%d", d)
				}
			}
		}()
	}
	wg.Wait()
	os.Exit(3) // only after an error: the parent reads it
	return true
}

func testCrash(t *testing.T, _ func(*testing.T) (seglog.Store, string), open Opener, opts Options) {
	switch {
	case !opts.Persistent:
		t.Skip("not persistent")
	case opts.NoCrash:
		t.Skip("Options.NoCrash")
	case testing.Short():
		t.Skip("-short")
	}
	parent := t.Name()[:strings.LastIndex(t.Name(), "/")] // Run's t
	dir := t.TempDir()
	var durable seglog.Seq
	for kill, lines := range []int{40, 120} {
		d := runAndKill(t, parent, dir, lines, opts.DurableOnAppend)
		durable = max(durable, d)
		s := open(t, dir)
		checkCrashed(t, s, durable)
		_, last := s.Bounds()
		seq, err := s.Append([]seglog.Entry{selfChecking(fmt.Sprintf("after-kill-%d", kill))})
		if err != nil || seq != last+1 {
			t.Fatalf("append after the crash: seq %d, %v; want %d", seq, err, last+1)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		durable = seq // Close synced it
		t.Logf("kill %d: %d durable reported, %d records after recovery", kill, d, last)
	}
}

// runAndKill runs the child on dir until it has reported lines durable
// points (or 30 s passed), kills it with SIGKILL and returns the highest
// point it reported.
func runAndKill(t *testing.T, parent, dir string, lines int, durableOnAppend bool) seglog.Seq {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+runPattern(parent), "-test.count=1")
	doa := "0"
	if durableOnAppend {
		doa = "1"
	}
	cmd.Env = append(os.Environ(), childDirEnv+"="+dir, childTestEnv+"="+parent, childTestEnv+"_DOA="+doa)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got := make(chan string)
	go func() {
		defer close(got)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			got <- sc.Text()
		}
	}()
	var durable seglog.Seq
	deadline := time.After(30 * time.Second)
	var failure string
read:
	for n := 0; n < lines; {
		select {
		case line, ok := <-got:
			if !ok {
				failure = "child exited"
				break read
			}
			if rest, ok := strings.CutPrefix(line, durableLine); ok {
				d, err := strconv.ParseUint(rest, 10, 64)
				if err != nil {
					failure = "child said " + line
					break read
				}
				durable = max(durable, seglog.Seq(d))
				n++
			} else if strings.HasPrefix(line, errorLine) {
				failure = line
				break read
			}
		case <-deadline:
			if durable == 0 {
				failure = "no durable point in 30 s"
			}
			break read
		}
	}
	cmd.Process.Kill() // SIGKILL
	for range got {    // drain, so the reader goroutine ends
	}
	cmd.Wait() // "signal: killed" is the expected end
	if failure != "" {
		t.Fatalf("crash child (%s): %s\nstderr: %s", runPattern(parent), failure, stderr.String())
	}
	return durable
}

// runPattern is a -test.run pattern matching exactly the test named name
// (with its subtest path).
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// checkCrashed checks a store reopened after a SIGKILL: nothing truncated,
// every record up to durable there, every record there self-checking and
// in order.
func checkCrashed(t *testing.T, s seglog.Store, durable seglog.Seq) {
	t.Helper()
	first, last := s.Bounds()
	if first != 1 || last < durable {
		t.Fatalf("bounds %d,%d after SIGKILL; %d was reported durable", first, last, durable)
	}
	if d := s.Durable(); d < durable || d > last {
		t.Errorf("durable %d after reopen; %d was reported, last %d", d, durable, last)
	}
	next := seglog.Seq(1)
	err := s.Scan(1, 0, func(r seglog.Record) bool {
		if r.Seq != next {
			t.Fatalf("scan after SIGKILL passed %d, want %d", r.Seq, next)
		}
		next++
		want := selfChecking(string(r.Meta))
		if !bytes.Equal(r.Data, want.Data) || r.Time != want.Time {
			t.Fatalf("record %d (meta %q) is not what was appended", r.Seq, r.Meta)
		}
		return true
	})
	if err != nil || next != last+1 {
		t.Fatalf("scan after SIGKILL: %v, ended at %d, last %d", err, next, last)
	}
}
