package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/seglog"

	"golang.org/x/sys/unix"
)

// openFilesUnder counts this process's descriptors on files under dir.
func openFilesUnder(t *testing.T, dir string) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, e := range es {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(target, dir+"/") {
			n++
		}
	}
	return n
}

// TestIdleLogsClosed: past MaxOpenPartitions idle partitions close their
// logs (the files open under the data directory stay bounded), reopen
// them at their next command with their state (deliveries, acks,
// publishes), and a restart after that loses nothing.
func TestIdleLogsClosed(t *testing.T) {
	const topics, max = 24, 3
	e := newEnvWith(t, func(o *Options) { o.MaxOpenPartitions = max })
	groups := map[int]*Group{}
	for i := range topics {
		tp := e.topic(TopicName(fmt.Sprintf("t%d", i)), TopicConfig{})
		groups[i] = e.group(tp, "g", GroupConfig{DeadLetter: "-"})
		e.publish(tp, fmt.Sprintf("first %d", i))
	}
	waitFor(t, "idle partitions closing their logs", func() bool { return e.b.OpenPartitions() <= max })
	// Each open partition: two logs, a LOCK file and a segment each; the
	// broker: its LOCK and the catalog journal; and a few for a moment (a
	// snapshot or a directory being synced by an open partition). All 24
	// open would be 96.
	if n := openFilesUnder(t, e.dir); n > max*fdsPerPartition+6 {
		t.Fatalf("%d files open under the data directory with %d partitions open", n, e.b.OpenPartitions())
	}
	for i := range topics {
		ds := e.pollNow(groups[i], 10, 1)
		if len(ds) != 1 || string(ds[0].Data) != fmt.Sprintf("first %d", i) {
			t.Fatalf("topic %d after its logs closed: %v", i, datas(ds))
		}
		if err := e.settle(ds[0], Ack()); err != nil {
			t.Fatal(err)
		}
		tp, _ := e.b.Topic(TopicName(fmt.Sprintf("t%d", i)))
		e.publish(tp, fmt.Sprintf("second %d", i))
	}
	waitFor(t, "idle partitions closing their logs", func() bool { return e.b.OpenPartitions() <= max })
	restartWith(e, max)
	for i := range topics {
		tp, _ := e.b.Topic(TopicName(fmt.Sprintf("t%d", i)))
		g, _ := tp.FindGroup("g")
		if ds := e.pollNow(g, 10, 1); len(ds) != 1 || string(ds[0].Data) != fmt.Sprintf("second %d", i) {
			t.Fatalf("topic %d after the restart: %v, want only its second message", i, datas(ds))
		}
	}
}

// TestSecondBrokerRefusedWhileLogsClosed: with every partition's logs
// (and their own locks) closed, a second broker on the directory is still
// refused, and so is Verify, by the directory's lock.
func TestSecondBrokerRefusedWhileLogsClosed(t *testing.T) {
	e := newEnvWith(t, func(o *Options) { o.MaxOpenPartitions = 1 })
	for i := range 4 {
		e.publish(e.topic(TopicName(fmt.Sprintf("t%d", i)), TopicConfig{}), "x")
	}
	waitFor(t, "idle partitions closing their logs", func() bool { return e.b.OpenPartitions() <= 1 })
	if b, err := Open(e.dir, e.opts()); !errors.Is(err, seglog.ErrLocked) {
		if err == nil {
			b.Close()
		}
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if _, err := Verify(e.dir, e.opts()); !errors.Is(err, seglog.ErrLocked) {
		t.Fatalf("Verify of a running broker's directory: %v, want ErrLocked", err)
	}
}

// TestOpenBoundsOpenLogs: a broker opened on more partitions than
// MaxOpenPartitions does not hold all their logs open once started.
func TestOpenBoundsOpenLogs(t *testing.T) {
	const topics, max = 20, 4
	e := newEnvWith(t, func(o *Options) { o.MaxOpenPartitions = max })
	for i := range topics {
		e.publish(e.topic(TopicName(fmt.Sprintf("t%d", i)), TopicConfig{}), "x")
	}
	restartWith(e, max)
	if n := e.b.OpenPartitions(); n > max {
		t.Fatalf("%d partitions open after Open, bound %d", n, max)
	}
	for i := range topics {
		tp, _ := e.b.Topic(TopicName(fmt.Sprintf("t%d", i)))
		if info := tp.Info(); info.Messages != 1 {
			t.Fatalf("topic %d: %+v", i, info)
		}
	}
}

// restartWith closes e's broker and opens it again with MaxOpenPartitions
// max.
func restartWith(e *testEnv, max int) {
	e.t.Helper()
	if err := e.b.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	o := e.opts()
	o.MaxOpenPartitions = max
	b, err := Open(e.dir, o)
	if err != nil {
		e.t.Fatalf("Open: %v", err)
	}
	e.b = b
}

const fileLimitChildEnv = "FIBRIL_BROKER_FILE_LIMIT_CHILD"

// TestReopenAtFileLimitChild is the child half of
// TestReopenAtFileLimit: it lowers its own RLIMIT_NOFILE, so the limit
// touches no other test.
func TestReopenAtFileLimitChild(t *testing.T) {
	if os.Getenv(fileLimitChildEnv) == "" {
		t.Skip("child process of TestReopenAtFileLimit")
	}
	var logs strings.Builder
	var mu sync.Mutex
	e := newEnvWith(t, func(o *Options) {
		o.MaxOpenPartitions = 1
		o.Logf = func(f string, a ...any) {
			mu.Lock()
			fmt.Fprintf(&logs, f+"\n", a...)
			mu.Unlock()
		}
	})
	var tps []*Topic
	for i := range 3 {
		tp := e.topic(TopicName(fmt.Sprintf("t%d", i)), TopicConfig{})
		e.publish(tp, "before")
		tps = append(tps, tp)
	}
	waitFor(t, "idle partitions closing their logs", func() bool { return e.b.OpenPartitions() <= 1 })
	var asleep *Topic
	for _, tp := range tps {
		if tp.parts[0].sleep.asleep.Load() {
			asleep = tp
		}
	}
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = 8 // below what is open already: no room for a new file at all
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	// Work a control closure leaves while the logs cannot reopen (a
	// settle taken on the control path waits for its event commit).
	left := make(chan error, 1)
	asleep.parts[0].control(func(p *partition) {
		p.commit.sets = append(p.commit.sets, setResult{done: func(err error) { left <- err }})
	})
	ctx := context.Background()
	_, perr := asleep.Publish(ctx, Message{Subject: string(asleep.name), Data: []byte("at the limit")})
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(perr, ErrTooManyFiles) {
		t.Fatalf("publish to a closed partition at the file limit: %v, want ErrTooManyFiles", perr)
	}
	if e.b.FileLimitErrors() == 0 {
		t.Fatal("the file limit error was not counted")
	}
	mu.Lock()
	logged := logs.String()
	mu.Unlock()
	if !strings.Contains(logged, "ERROR") || !strings.Contains(logged, "too many open files") {
		t.Fatalf("no ERROR about the limit in the log:\n%s", logged)
	}
	if os.Getenv(fileLimitChildEnv) == "close" {
		// Close with that work left: it is finished, not dropped.
		if err := e.b.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-left:
			if err != nil {
				t.Fatalf("left work finished with %v", err)
			}
		default:
			t.Fatal("Close dropped the work left while the logs were closed")
		}
		fmt.Println("FILE LIMIT CHILD OK")
		return
	}
	e.publish(asleep, "after")
	if err := <-left; err != nil {
		t.Fatalf("left work finished with %v", err)
	}
	g := e.group(asleep, "g", GroupConfig{DeadLetter: "-"})
	if ds := e.pollNow(g, 10, 1); len(datas(ds)) != 2 || string(ds[0].Data) != "before" || string(ds[1].Data) != "after" {
		t.Fatalf("after the limit was raised: %v, want [before after]", datas(ds))
	}
	fmt.Println("FILE LIMIT CHILD OK")
}

// TestReopenAtFileLimit: a partition whose logs are closed and cannot
// reopen them at the open-files limit answers the publish with
// ErrTooManyFiles (the server's too_many_files), counts it and logs an
// ERROR; once descriptors are free again it reopens and loses nothing,
// and work its control closures left meanwhile is finished, by the next
// command or by Close.
func TestReopenAtFileLimit(t *testing.T) {
	if os.Getenv(fileLimitChildEnv) != "" {
		t.Skip("in the child")
	}
	for _, mode := range []string{"publish", "close"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestReopenAtFileLimitChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), fileLimitChildEnv+"="+mode)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "FILE LIMIT CHILD OK") {
			t.Fatalf("child (%s): %v\n%s", mode, err, out)
		}
	}
}

// TestAgeLimitWakesClosedPartition: a partition whose topic has an age
// limit closes its logs all the same, with its timer set for when its
// oldest message expires; the timer reopens them (and the cache then
// closes the least recently used other).
func TestAgeLimitWakesClosedPartition(t *testing.T) {
	clk := newFakeClock()
	e := newEnv(t, clk)
	aged := e.topic("aged", TopicConfig{Retention: RetentionLimits, MaxAgeMs: 60_000})
	e.publish(aged, "expires")
	plain := e.topic("plain", TopicConfig{})
	e.publish(plain, "stays")
	restartWith(e, 1) // Open closes the older one at once: aged
	aged, _ = e.b.Topic("aged")
	plain, _ = e.b.Topic("plain")
	asleep := func(tp *Topic) bool { return tp.parts[0].sleep.asleep.Load() }
	waitFor(t, "aged's logs closed at Open", func() bool { return asleep(aged) && !asleep(plain) })
	clk.Advance(61 * time.Second)
	waitFor(t, "aged reopened by its timer, plain closed", func() bool { return !asleep(aged) && asleep(plain) })
}
