package fibril_test

// Runs examples/worker against the real server: concurrency, ack, nack with
// backoff, and SIGTERM with a backlog (issue 33, item 1: the worker took
// 27.6 s to exit; it must exit within 1 s with its in-flight work handed
// back).

import (
	"bufio"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"
)

// worker is a running examples/worker process and the lines it printed.
type worker struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []string
	exited chan error
}

func (w *worker) has(pred func(string) bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, l := range w.lines {
		if pred(l) {
			n++
		}
	}
	return n
}

func (w *worker) output() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, " | ")
}

// buildWorker builds examples/worker once per test binary.
var buildWorker = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(serverTemp, "worker")
	if out, err := exec.Command("go", "build", "-o", bin, "./examples/worker").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./examples/worker: %w\n%s", err, out)
	}
	return bin, nil
})

// startWorker starts examples/worker on the shared server and waits for its
// ready line.
func startWorker(t *testing.T, args ...string) *worker {
	t.Helper()
	bin, err := buildWorker()
	if err != nil {
		t.Fatal(err)
	}
	w := &worker{cmd: exec.Command(bin, append([]string{"-url", serverURL}, args...)...), exited: make(chan error, 1)}
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	w.cmd.Stderr = &stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.cmd.Process.Kill(); <-w.exited })
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			w.mu.Lock()
			w.lines = append(w.lines, sc.Text())
			w.mu.Unlock()
		}
		w.exited <- w.cmd.Wait()
	}()
	waitFor(t, 30*time.Second, "worker ready", func() bool {
		return w.has(func(l string) bool { return l == "ready" }) > 0
	})
	return w
}

func is(s string) func(string) bool { return func(l string) bool { return l == s } }

// TestWorkerExampleRetriesAndFinishesJobInProgress: jobs are processed,
// failing ones retried with a doubling backoff, and a job in progress at
// SIGTERM is finished and acked before the worker exits 0.
func TestWorkerExampleRetriesAndFinishesJobInProgress(t *testing.T) {
	c := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{})
	if _, err := c.CreateGroup(testCtx(t), topic, "workers", fibril.GroupConfig{MaxDeliveries: 5}); err != nil {
		t.Fatal(err)
	}
	w := startWorker(t, "-topic", topic, "-group", "workers", "-n", "3", "-backoff", "20ms")
	for _, j := range []string{"job-1", "job-2", "fail:2"} {
		if _, err := c.Publish(testCtx(t), topic, []byte(j)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "jobs done", func() bool {
		return w.has(is("done job-1 attempt=1")) == 1 && w.has(is("done job-2 attempt=1")) == 1 &&
			w.has(is("done fail:2 attempt=3")) == 1
	})
	if w.has(is("retry fail:2 attempt=1 delay=20ms")) != 1 || w.has(is("retry fail:2 attempt=2 delay=40ms")) != 1 {
		t.Fatalf("backoff does not double: %s", w.output())
	}
	if _, err := c.Publish(testCtx(t), topic, []byte("sleep:300ms")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "long job started", func() bool { return w.has(is("start sleep:300ms")) == 1 })
	w.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-w.exited; err != nil {
		t.Fatalf("worker exited with %v: %s", err, w.output())
	}
	w.exited <- nil // for the cleanup
	if w.has(is("done sleep:300ms attempt=1")) != 1 || w.has(is("stopped")) != 1 {
		t.Fatalf("job in progress not finished before the exit: %s", w.output())
	}
	gi := groupInfo(t, c, topic, "workers")
	if gi.Pending+gi.Inflight != 0 {
		t.Fatalf("after the exit: %d pending, %d in flight", gi.Pending, gi.Inflight)
	}
}

// TestWorkerExampleSIGTERMWithBacklogExitsAtOnce: SIGTERM'd with about a
// hundred 50 ms jobs buffered, the worker finishes the two in progress and
// exits within 1 s (it used to run the buffered ones too, and under a
// steady stream never stopped); every job it did not finish is pending
// again at once (the group's lease is 10 minutes, so nothing comes back by
// expiry).
func TestWorkerExampleSIGTERMWithBacklogExitsAtOnce(t *testing.T) {
	const total = 200
	c := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{Partitions: 1})
	if _, err := c.CreateGroup(testCtx(t), topic, "workers", fibril.GroupConfig{LeaseMs: 600_000}); err != nil {
		t.Fatal(err)
	}
	out := make([]fibril.OutMsg, total)
	for i := range out {
		out[i] = fibril.OutMsg{Subject: topic, Data: []byte("sleep:50ms")}
	}
	if _, err := c.PublishBatch(testCtx(t), out); err != nil {
		t.Fatal(err)
	}
	w := startWorker(t, "-topic", topic, "-group", "workers", "-n", "2", "-max-in-flight", "100")
	done := func(l string) bool { return strings.HasPrefix(l, "done ") }
	waitFor(t, 10*time.Second, "ten jobs done", func() bool { return w.has(done) >= 10 })
	t0 := time.Now()
	w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-w.exited:
		if err != nil {
			t.Fatalf("worker exited with %v: %s", err, w.output())
		}
		w.exited <- nil
	case <-time.After(5 * time.Second):
		t.Fatalf("worker still running 5 s after SIGTERM, %d jobs done", w.has(done))
	}
	if el := time.Since(t0); el > time.Second {
		t.Fatalf("worker took %v to exit after SIGTERM", el)
	}
	finished := uint64(w.has(done))
	if finished >= total {
		t.Fatalf("worker finished the whole backlog (%d jobs) before exiting", finished)
	}
	gi := groupInfo(t, c, topic, "workers")
	if gi.Inflight != 0 || gi.Pending != total-finished {
		t.Fatalf("after the exit: %d pending, %d in flight; want %d pending, none in flight",
			gi.Pending, gi.Inflight, total-finished)
	}
}
