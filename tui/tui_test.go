package tui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/fibrilmq/fibril/internal/testserver"
	"github.com/fibrilmq/fibril/protocol"
	fibril "github.com/fibrilmq/fibril/sdk"
	"github.com/fibrilmq/fibril/server"
)

// helperEnv, when set in the environment, makes the test binary run the TUI
// against the URL it names instead of the tests (the helper-process pattern),
// so tmux can run it in a real terminal.
const helperEnv = "FIBRIL_TUI_HELPER_URL"

func TestMain(m *testing.M) {
	if url := os.Getenv(helperEnv); url != "" {
		err := Run(context.Background(), Options{URL: url, Interval: 200 * time.Millisecond, Burst: 50})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if code == 0 {
		// Servers, clients and the bubbletea program must not outlive the tests.
		if leaked := testserver.LeakedGoroutines(5*time.Second, "github.com/fibrilmq/fibril/", "github.com/charmbracelet/"); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines leaked by the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

func testClient(t *testing.T, s *server.Server) *client {
	t.Helper()
	c, err := dial(context.Background(), Options{URL: s.Addr().String(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.close() })
	return c
}

func createTopic(t *testing.T, c *client, name string, cfg fibril.TopicConfig) {
	t.Helper()
	ctx, cancel := c.call()
	defer cancel()
	if _, err := c.conn.CreateTopic(ctx, name, cfg); err != nil {
		t.Fatalf("TOPIC CREATE %s: %v", name, err)
	}
}

func TestClientAgainstServer(t *testing.T) {
	s := testserver.Start(t)
	c := testClient(t, s)
	createTopic(t, c, "orders", fibril.TopicConfig{Partitions: 2})
	if err := c.groupCreate("orders", "billing"); err != nil {
		t.Fatalf("GROUP CREATE: %v", err)
	}
	n, err := c.publish("orders", 300, func(i int) []byte { return []byte(strconv.Itoa(i)) })
	if err != nil || n != 300 {
		t.Fatalf("publish: %d stored, %v", n, err)
	}
	got, err := c.consume("orders", "billing", 40)
	if err != nil || got == 0 || got > 40 {
		t.Fatalf("consume: %d, %v", got, err)
	}
	snap, err := fetch(c)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	var orders *topicView
	for i := range snap.topics {
		if snap.topics[i].name == "orders" {
			orders = &snap.topics[i]
		}
	}
	if orders == nil || orders.published != 300 || len(orders.groups) != 1 {
		t.Fatalf("snapshot: %+v", snap.topics)
	}
	if g := orders.groups[0]; g.ordered != "" {
		t.Errorf("billing's ordering %q, want none", g.ordered)
	}
	g := orders.groups[0]
	if g.name != "billing" || g.inflight != 0 || g.acked != uint64(got) || g.ready != 300-uint64(got) {
		t.Errorf("group view %+v after acking %d of 300", g, got)
	}

	// Held leases show as in flight until acked.
	held, err := c.poll("orders", "billing", 7)
	if err != nil || len(held) != 7 {
		t.Fatalf("poll: %d, %v", len(held), err)
	}
	if snap, err = fetch(c); err != nil || snap.topics[0].groups[0].inflight != 7 {
		t.Fatalf("in flight after poll: %+v %v", snap.topics, err)
	}
	if err := c.ack(held); err != nil {
		t.Fatalf("ack: %v", err)
	}

	// A group's ordering shows on its line.
	ctx, cancel := c.call()
	defer cancel()
	if _, err := c.conn.CreateGroup(ctx, "orders", "ledger", fibril.GroupConfig{Ordered: "key"}); err != nil {
		t.Fatalf("GROUP CREATE ledger: %v", err)
	}
	if snap, err = fetch(c); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	m := newModel(c, Options{Interval: time.Second})
	m.apply(snap)
	var ledger string
	for _, l := range strings.Split(m.View(), "\n") {
		if strings.Contains(l, "└ ledger") {
			ledger = l
		}
	}
	if !strings.Contains(ledger, "ledger [ordered by key]") {
		t.Errorf("the ledger group's line %q does not say it is ordered by key:\n%s", ledger, m.View())
	}

	// Errors come back as typed protocol errors, and the connection stays
	// usable afterwards (strict answers keep the FIFO aligned).
	_, err = c.topicInfo("nope")
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeUnknownTopic {
		t.Fatalf("TOPIC INFO nope: %v, want an unknown_topic protocol error", err)
	}
	if _, err := c.topicList(); err != nil {
		t.Fatalf("TOPIC LIST after an error: %v", err)
	}
}

// TestDialCredentials: credentials come from the URL unless Options names
// them, and a wrong one is refused with an error, not a hang.
func TestDialCredentials(t *testing.T) {
	s := testserver.Start(t, testserver.WithOptions(func(o *server.Options) { o.Token = "sesame" }))
	addr := s.Addr().String()
	for _, tc := range []struct {
		name string
		o    Options
		ok   bool
	}{
		{"token in URL", Options{URL: "nats://sesame@" + addr}, true},
		{"option over URL", Options{URL: "nats://wrong@" + addr, Token: "sesame"}, true},
		{"wrong token", Options{URL: addr, Token: "wrong"}, false},
		{"none", Options{URL: "fibril://" + addr}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Timeout = 5 * time.Second
			c, err := dial(context.Background(), tc.o)
			if tc.ok != (err == nil) {
				t.Fatalf("dial: %v, want ok=%v", err, tc.ok)
			}
			if err == nil {
				if _, err := c.topicList(); err != nil {
					t.Errorf("TOPIC LIST: %v", err)
				}
				c.close()
			}
		})
	}
}

func TestRunRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{
		{},
		{URL: "127.0.0.1:1", Interval: time.Millisecond},
		{URL: "127.0.0.1:1", Burst: -1},
		{URL: "127.0.0.1:1", DemoSubject: "a.*"},
	} {
		if err := Run(context.Background(), o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("Run(%+v): %v, want ErrInvalidOptions", o, err)
		}
	}
	// A refused connection is an error, not a hang.
	if err := Run(context.Background(), Options{URL: "127.0.0.1:1", Timeout: 2 * time.Second}); err == nil {
		t.Error("Run against a closed port: nil error")
	}
}

func TestSparkline(t *testing.T) {
	for _, tc := range []struct {
		vals  []float64
		width int
		want  string
	}{
		{nil, 3, "   "},
		{[]float64{0, 0}, 2, "▁▁"},
		{[]float64{0, 7, 14}, 4, " ▁▄█"},
		{[]float64{1, 2, 3, 4}, 2, "▆█"},
	} {
		if got := sparkline(tc.vals, tc.width); got != tc.want {
			t.Errorf("sparkline(%v, %d) = %q, want %q", tc.vals, tc.width, got, tc.want)
		}
	}
}

// tmuxSession runs the TUI (this test binary in helper mode) in a detached
// tmux session with its own server socket; it is killed when the test ends.
type tmuxSession struct {
	t      *testing.T
	socket string
}

func (s *tmuxSession) cmd(args ...string) (string, error) {
	out, err := exec.Command("tmux", append([]string{"-S", s.socket}, args...)...).CombinedOutput()
	return string(out), err
}

func startTUI(t *testing.T, url string) *tmuxSession {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not found: install it (apt-get install -y tmux) to run the terminal UI test")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := &tmuxSession{t: t, socket: filepath.Join(t.TempDir(), "tmux.sock")}
	command := fmt.Sprintf("env %s=%s TERM=xterm-256color %s", helperEnv, url, self)
	if out, err := s.cmd("-f", "/dev/null", "new-session", "-d", "-s", "tui", "-x", "140", "-y", "30", command); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	t.Cleanup(func() { _, _ = s.cmd("kill-server") })
	return s
}

// screen returns what the terminal shows now.
func (s *tmuxSession) screen() string {
	out, err := s.cmd("capture-pane", "-p", "-t", "tui")
	if err != nil {
		s.t.Fatalf("capture-pane: %v: %s", err, out)
	}
	return out
}

var publishedRe = regexp.MustCompile(`(?m)^. orders\s+published (\d+)`)
var groupRe = regexp.MustCompile(`(?m)└ billing\s+ready (\d+)\s+in flight (\d+)\s+acked (\d+)`)
var demoRe = regexp.MustCompile(`(?m)└ ` + DemoGroup + `\s+ready (\d+)\s+in flight (\d+)\s+acked (\d+)`)

func TestTUIInTerminal(t *testing.T) {
	s := testserver.Start(t)
	c := testClient(t, s)
	createTopic(t, c, "orders", fibril.TopicConfig{})
	if err := c.groupCreate("orders", "billing"); err != nil {
		t.Fatal(err)
	}
	if n, err := c.publish("orders", 10, func(int) []byte { return []byte("x") }); err != nil || n != 10 {
		t.Fatalf("publish: %d, %v", n, err)
	}

	tm := startTUI(t, s.Addr().String())
	var scr string
	defer func() {
		if t.Failed() {
			t.Logf("last screen:\n%s", scr)
		}
	}()
	count := func() int {
		m := publishedRe.FindStringSubmatch(scr)
		if m == nil {
			return -1
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	testserver.WaitFor(t, 15*time.Second, "the TUI to show topic orders with 10 published", func() bool {
		scr = tm.screen()
		return count() == 10
	})
	if !strings.Contains(scr, "└ billing") {
		t.Fatalf("group billing not on screen:\n%s", scr)
	}

	// Traffic from another client moves the count on screen.
	if _, err := c.publish("orders", 25, func(int) []byte { return []byte("y") }); err != nil {
		t.Fatal(err)
	}
	testserver.WaitFor(t, 10*time.Second, "published to reach 35 on screen", func() bool {
		scr = tm.screen()
		return count() == 35
	})

	// The p key publishes a burst (50) from the TUI itself, to the selected
	// topic (orders is the only one, so it is selected).
	if out, err := tm.cmd("send-keys", "-t", "tui", "p"); err != nil {
		t.Fatalf("send-keys: %v: %s", err, out)
	}
	testserver.WaitFor(t, 10*time.Second, "p to publish 50 more", func() bool {
		scr = tm.screen()
		return count() == 85 && strings.Contains(scr, "published 50 to orders")
	})
	// The c key consumes and acks a burst as the TUI's own group, and says
	// so; billing's messages stay ready.
	if out, err := tm.cmd("send-keys", "-t", "tui", "c"); err != nil {
		t.Fatalf("send-keys: %v: %s", err, out)
	}
	testserver.WaitFor(t, 10*time.Second, "c to ack messages as "+DemoGroup, func() bool {
		scr = tm.screen()
		m := demoRe.FindStringSubmatch(scr)
		return m != nil && m[3] != "0" && strings.Contains(scr, "from orders/"+DemoGroup)
	})
	if m := groupRe.FindStringSubmatch(scr); m == nil || m[1] != "85" || m[3] != "0" {
		t.Fatalf("c touched billing:\n%s", scr)
	}
	// t turns continuous traffic on: ready, in flight and acked all move.
	m := demoRe.FindStringSubmatch(scr)
	acked0 := m[3]
	if out, err := tm.cmd("send-keys", "-t", "tui", "t"); err != nil {
		t.Fatalf("send-keys: %v: %s", err, out)
	}
	testserver.WaitFor(t, 15*time.Second, "traffic to hold deliveries in flight and ack more", func() bool {
		scr = tm.screen()
		m := demoRe.FindStringSubmatch(scr)
		return m != nil && m[2] != "0" && m[3] != acked0 && count() > 85 && strings.Contains(scr, "traffic (ON)")
	})
	if m := groupRe.FindStringSubmatch(scr); m == nil || m[2] != "0" || m[3] != "0" {
		t.Fatalf("traffic touched billing:\n%s", scr)
	}
	t.Logf("screen:\n%s", scr)
	shown := scr
	if out, err := tm.cmd("send-keys", "-t", "tui", "t"); err != nil {
		t.Fatalf("send-keys: %v: %s", err, out)
	}
	testserver.WaitFor(t, 10*time.Second, "traffic to stop and release its leases", func() bool {
		scr = tm.screen()
		m := demoRe.FindStringSubmatch(scr)
		return m != nil && m[2] == "0" && strings.Contains(scr, "traffic stopped")
	})
	if dir := os.Getenv("FIBRIL_SCREENSHOT_DIR"); dir != "" {
		// The text of the screen, for the README (tmux has no image output).
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "tui.txt"), []byte(shown), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	if out, err := tm.cmd("send-keys", "-t", "tui", "q"); err != nil {
		t.Fatalf("send-keys: %v: %s", err, out)
	}
	testserver.WaitFor(t, 10*time.Second, "the TUI to exit on q", func() bool {
		_, err := tm.cmd("has-session", "-t", "tui")
		return err != nil
	})
	// Quitting deleted the demo group; billing is as it was.
	testserver.WaitFor(t, 10*time.Second, "the TUI to delete "+DemoGroup, func() bool {
		ctx, cancel := c.call()
		defer cancel()
		_, err := c.conn.Group(ctx, "orders", DemoGroup)
		return errors.Is(err, protocol.ErrUnknownGroup)
	})
	if gi, err := c.groupInfo("orders", "billing"); err != nil || gi.Inflight != 0 {
		t.Fatalf("billing after the TUI: %+v %v", gi, err)
	}
}

// TestDemoKeysNeverAckARealGroup: c and t lease and ack as DemoGroup, never
// as the topic's own group (they used to take its first group: c acked a
// burst of a real consumer's messages), and quitting deletes DemoGroup.
func TestDemoKeysNeverAckARealGroup(t *testing.T) {
	s := testserver.Start(t)
	c := testClient(t, s)
	createTopic(t, c, "orders", fibril.TopicConfig{})
	if err := c.groupCreate("orders", "billing"); err != nil {
		t.Fatal(err)
	}
	if n, err := c.publish("orders", 10, func(int) []byte { return []byte("x") }); err != nil || n != 10 {
		t.Fatalf("publish: %d, %v", n, err)
	}
	opts := Options{URL: s.Addr().String(), Burst: 5}
	if err := opts.fill(); err != nil {
		t.Fatal(err)
	}
	m := newModel(c, opts)
	step := func(cmd tea.Cmd) actionMsg {
		t.Helper()
		if cmd == nil {
			t.Fatal("no command")
		}
		msg, ok := cmd().(actionMsg)
		if !ok {
			t.Fatalf("command returned %T", msg)
		}
		if msg.err != nil {
			t.Fatal(msg.err)
		}
		m.Update(msg)
		return msg
	}
	refresh := func() {
		snap, err := fetch(c)
		if err != nil {
			t.Fatal(err)
		}
		m.snap = snap
	}
	billing := func(when string) {
		t.Helper()
		gi, err := c.groupInfo("orders", "billing")
		if err != nil || gi.Inflight != 0 || len(gi.Partitions) != 1 || gi.Partitions[0].Delivered != 0 {
			t.Fatalf("%s: billing %+v %v, want nothing ever delivered", when, gi, err)
		}
	}
	refresh()
	if msg := step(m.key("c")); !strings.Contains(msg.text, "consumed and acked 5 from orders/"+DemoGroup) {
		t.Fatalf("c said %q", msg.text)
	}
	billing("after c")
	refresh()
	m.key("t")
	if msg := step(m.action(m.trafficRound(m.held))); !strings.Contains(msg.text, "orders/"+DemoGroup) || len(m.held.msgs) == 0 {
		t.Fatalf("traffic said %q, holds %d", msg.text, len(m.held.msgs))
	}
	billing("after a traffic round")
	if !strings.Contains(m.View(), "consume as group "+DemoGroup) {
		t.Fatalf("the screen does not say which group c and t use:\n%s", m.View())
	}
	step(m.key("t")) // stop: release the held leases
	if err := m.removeDemoGroups(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.groupInfo("orders", DemoGroup); !errors.Is(err, protocol.ErrUnknownGroup) {
		t.Fatalf("%s after quitting: %v, want unknown_group", DemoGroup, err)
	}
	billing("after quitting")
}

// TestPublishKeyCreatesTheDemoTopic: with no topics, p creates the demo
// topic and publishes to it (it relied on the server auto-creating topics,
// which is off by default).
func TestPublishKeyCreatesTheDemoTopic(t *testing.T) {
	s := testserver.Start(t, testserver.WithOptions(func(o *server.Options) { o.AutoCreate = nil }))
	c := testClient(t, s)
	opts := Options{URL: s.Addr().String(), Burst: 7}
	if err := opts.fill(); err != nil {
		t.Fatal(err)
	}
	m := newModel(c, opts)
	msg, ok := m.key("p")().(actionMsg)
	if !ok || msg.err != nil || msg.text != "published 7 to fibril.demo" {
		t.Fatalf("p: %+v", msg)
	}
	ti, err := c.topicInfo("fibril.demo")
	if err != nil || ti.Msgs != 7 {
		t.Fatalf("fibril.demo: %+v %v", ti, err)
	}
}
