package broker

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

const killCreateEnv = "FIBRIL_BROKER_KILL_CREATE_DIR"

// TestKillCreatesChild is the child half of TestKillDuringCreates: four
// goroutines create topics (and on every third one a group) on the broker
// in $FIBRIL_BROKER_KILL_CREATE_DIR, printing each answered change, until
// the parent kills the process.
func TestKillCreatesChild(t *testing.T) {
	dir := os.Getenv(killCreateEnv)
	if dir == "" {
		t.Skip("child process of TestKillDuringCreates")
	}
	o := Options{Logf: func(string, ...any) {}, SegmentSize: 64 << 10, EventSegmentSize: 64 << 10}
	b, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	round := os.Getenv(killCreateEnv + "_ROUND")
	var mu sync.Mutex
	say := func(format string, a ...any) {
		mu.Lock()
		fmt.Printf(format+"\n", a...)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				name := TopicName(fmt.Sprintf("r%s.w%d.%d", round, w, i))
				tp, err := b.CreateTopic(name, TopicConfig{})
				if err != nil {
					say("ERROR %v", err)
					return
				}
				say("TOPIC %s", name)
				if i%3 == 0 {
					if _, err := tp.Group("g", GroupConfig{DeadLetter: "-"}); err != nil {
						say("ERROR %v", err)
						return
					}
					say("GROUP %s", name)
				}
			}
		}()
	}
	wg.Wait()
}

// TestKillDuringCreates kills (SIGKILL) a child process in the middle of
// concurrent topic and group creates, reopens the directory and checks
// that every create the child was answered survived; a second round on
// the same directory does it again over the recovered catalog.
func TestKillDuringCreates(t *testing.T) {
	if os.Getenv(killCreateEnv) != "" {
		t.Skip("in the child")
	}
	dir := t.TempDir()
	topics, groups := map[TopicName]bool{}, map[TopicName]bool{}
	for round, killAfter := range []int{25, 60} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillCreatesChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), killCreateEnv+"="+dir, fmt.Sprintf("%s_ROUND=%d", killCreateEnv, round))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		out := bufio.NewScanner(stdout)
		answered := 0
		for answered < killAfter && out.Scan() {
			kind, name, _ := strings.Cut(out.Text(), " ")
			switch kind {
			case "TOPIC":
				topics[TopicName(name)] = true
				answered++
			case "GROUP":
				groups[TopicName(name)] = true
				answered++
			case "ERROR":
				t.Fatalf("child: %s", name)
			}
		}
		cmd.Process.Kill()
		cmd.Wait()
		if answered < killAfter {
			t.Fatalf("round %d: the child ended after %d answers: %v", round, answered, out.Err())
		}
		b, err := Open(dir, Options{Logf: t.Logf, SegmentSize: 64 << 10, EventSegmentSize: 64 << 10})
		if err != nil {
			t.Fatalf("round %d: Open after the kill: %v", round, err)
		}
		for name := range topics {
			tp, ok := b.Topic(name)
			if !ok {
				b.Close()
				t.Fatalf("round %d: answered topic %s lost", round, name)
			}
			if _, ok := tp.FindGroup("g"); groups[name] && !ok {
				b.Close()
				t.Fatalf("round %d: answered group %s/g lost", round, name)
			}
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
