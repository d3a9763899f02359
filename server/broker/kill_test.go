package broker

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

const killDirEnv = "FIBRIL_BROKER_KILL_DIR"

// TestKillChild is the child half of TestKillAndRecover: it runs random
// work on a broker in $FIBRIL_BROKER_KILL_DIR, printing the state a restart
// must show after every step, then waits for a line on stdin before the
// next step. It never closes the broker: the parent kills it.
func TestKillChild(t *testing.T) {
	dir := os.Getenv(killDirEnv)
	if dir == "" {
		t.Skip("child process of TestKillAndRecover")
	}
	seed, _ := strconv.ParseUint(os.Getenv(killDirEnv+"_SEED"), 10, 64)
	r := rand.New(rand.NewPCG(seed, 3))
	e := &testEnv{t: t, dir: dir, durSync: seed%2 == 0}
	o := e.opts()
	o.SnapshotEvery = 1 + r.IntN(10)
	o.Logf = func(string, ...any) {}
	b, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	e.b = b
	tp := e.topic("q", TopicConfig{Partitions: 2})
	cfg := GroupConfig{MaxDeliveries: 3, DeadLetter: "-"}
	e.group(tp, "a", cfg)
	e.group(tp, "b", cfg)
	in := bufio.NewScanner(os.Stdin)
	var held []Delivery
	for step := 0; ; step++ {
		groups := tp.Groups()
		g := groups[r.IntN(len(groups))]
		switch op := r.IntN(10); {
		case op < 4:
			e.publish(tp, fmt.Sprint(step))
		case op < 7:
			held = append(held, e.pollNow(g, 1+r.IntN(3), 1)...)
		case len(held) > 0:
			i := r.IntN(len(held))
			ops := []SettleOp{Ack(), Ack(), Nack(0), Reject()}
			_ = e.settle(held[i], ops[r.IntN(len(ops))])
			held = append(held[:i], held[i+1:]...)
		}
		fmt.Printf("STEP %d %q\n", step, dumpState(t, b, true))
		if !in.Scan() {
			return
		}
	}
}

// TestKillAndRecover kills (SIGKILL) a child process that runs a broker on
// the real file log at a random step, reopens the directory and compares
// the recovered consumer state with what the child reported.
func TestKillAndRecover(t *testing.T) {
	if os.Getenv(killDirEnv) != "" {
		t.Skip("in the child")
	}
	for seed := 1; seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), killDirEnv+"="+dir, fmt.Sprintf("%s_SEED=%d", killDirEnv, seed))
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			defer cmd.Process.Kill()
			killAt := 20 + seed*17
			out := bufio.NewScanner(stdout)
			out.Buffer(nil, 1<<20)
			var want string
			for step := 0; step <= killAt; step++ {
				if !out.Scan() {
					t.Fatalf("child ended early at step %d: %v", step, out.Err())
				}
				line := out.Text()
				prefix := fmt.Sprintf("STEP %d ", step)
				if !strings.HasPrefix(line, prefix) {
					t.Fatalf("child said %q", line)
				}
				if want, err = strconv.Unquote(line[len(prefix):]); err != nil {
					t.Fatal(err)
				}
				if step < killAt {
					fmt.Fprintln(stdin, "go")
				}
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			e := &testEnv{t: t, dir: dir, durSync: seed%2 == 0}
			e.open()
			defer e.b.Close()
			deadline := time.Now().Add(5 * time.Second)
			for {
				got := dumpState(t, e.b, false)
				if got == want {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after kill at step %d:\n got: %s\nwant: %s", killAt, got, want)
				}
			}
		})
	}
}
