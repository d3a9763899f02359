package e2e

// The adversarial suite, long form (make test-adversarial): a `fibril
// serve` process under 1,000 hostile pre-auth connections of each kind,
// and under stalled consumers of each kind, with what SPEC.md and issue 23
// promise measured, not only the behaviour (the short form, run by make
// test, is server/adversarial_test.go, server/outbound_test.go and
// server/fulldisk_test.go):
//
//   - pre-auth: a logged-in client keeps >= 80 % of its baseline publish
//     throughput, the server's RSS grows by <= 100 MiB, a new login takes
//     <= 1 s;
//   - stalled consumers: the server's anonymous memory stays <=
//     max_pending + 64 MiB (and <= max_pending + 12 MiB over the same
//     publishes with no consumer), the consumer is cut, and every message
//     it held is delivered to another consumer.
//
// It runs only with FIBRIL_ADVERSARIAL=long (minutes, past go test's
// default 10-minute timeout with -peer: give -timeout 30m; the machine's
// other load shows in the figures, which it logs). One phase runs alone
// by its subtest name: -run 'TestAdversarialPreAuthLong/slowloris/' (both
// servers) or '.../slowloris/fibril'. FIBRIL_BIN=path measures another
// build of fibril (a before and after, side by side), and
// FIBRIL_ADVERSARIAL_PROFILE=dir writes the server's CPU profile.

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

func longForm(t *testing.T) {
	if os.Getenv("FIBRIL_ADVERSARIAL") != "long" {
		t.Skip("long form of the adversarial suite: run make test-adversarial (FIBRIL_ADVERSARIAL=long)")
	}
}

// procStatus reads fields of /proc/<pid>/status in KiB.
func procStatus(t *testing.T, pid int) map[string]int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 2 && f[1] == "kB" {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			out[k] = n
		}
	}
	return out
}

// cpuSeconds is the CPU time (user + system) process pid has used; pid 0
// is this process.
func cpuSeconds(pid int) float64 {
	path := "/proc/self/stat"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/stat", pid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / 100 // USER_HZ
}

// dialFrom dials addr from the loopback address src.
func dialFrom(src, addr string, rcvbuf int) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
			})
			return errors.Join(err, serr)
		}
	}
	return d.Dial("tcp", addr)
}

// login connects from src as app/pass in Fibril mode and returns the
// connection and how long the login took.
func login(addr, src, pass string) (net.Conn, *bufio.Reader, time.Duration, error) {
	return loginAs(addr, src, `"fibril":1,`, "app", pass)
}

// loginAs connects from src as user/pass with the CONNECT fields mode
// (`"fibril":1,`, or `"verbose":true,` for a NATS server: both answer
// +OK) and returns the connection and how long the login took.
func loginAs(addr, src, mode, user, pass string) (net.Conn, *bufio.Reader, time.Duration, error) {
	start := time.Now()
	nc, err := dialFrom(src, addr, 0)
	if err != nil {
		return nil, nil, 0, err
	}
	r := bufio.NewReaderSize(nc, 1<<16)
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(nc, `CONNECT {`+mode+`"user":"`+user+`","pass":"`+pass+`"}`+"\r\n"); err != nil {
		nc.Close()
		return nil, nil, 0, err
	}
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			nc.Close()
			return nil, nil, 0, err
		}
		if strings.HasPrefix(l, "INFO ") {
			continue
		}
		if l == "PING\r\n" { // a NATS server asks before it answers
			_, _ = io.WriteString(nc, "PONG\r\n")
			continue
		}
		if strings.TrimSpace(l) != "+OK" {
			nc.Close()
			return nil, nil, time.Since(start), fmt.Errorf("login answered %q", l)
		}
		_ = nc.SetDeadline(time.Time{})
		return nc, r, time.Since(start), nil
	}
}

// publishRate publishes 128-byte messages to topic with 256 confirms in
// flight for d and returns the confirms per second.
func publishRate(nc net.Conn, r *bufio.Reader, topic string, d time.Duration) (float64, error) {
	frame := []byte(fmt.Sprintf("PUB %s 128\r\n%s\r\n", topic, strings.Repeat("p", 128)))
	window := make(chan struct{}, 256)
	stop := make(chan struct{})
	var sent atomic.Int64
	werr := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				werr <- nil
				return
			case window <- struct{}{}:
			}
			if _, err := nc.Write(frame); err != nil {
				werr <- err
				return
			}
			sent.Add(1)
		}
	}()
	start := time.Now()
	var got int64
	_ = nc.SetReadDeadline(time.Now().Add(d + 10*time.Second))
	for time.Since(start) < d {
		l, err := r.ReadString('\n')
		if err != nil {
			close(stop)
			return 0, err
		}
		if l == "PING\r\n" { // a NATS server's keepalive
			if _, err := io.WriteString(nc, "PONG\r\n"); err != nil {
				close(stop)
				return 0, err
			}
			continue
		}
		if !strings.HasPrefix(l, "+OK") { // "+OK <seq>", or a NATS server's verbose "+OK"
			close(stop)
			return 0, fmt.Errorf("publish answered %q", l)
		}
		got++
		<-window
	}
	rate := float64(got) / time.Since(start).Seconds()
	close(stop)
	if err := <-werr; err != nil {
		return 0, err
	}
	for got < sent.Load() { // the confirms still in flight
		l, err := r.ReadString('\n')
		if err != nil {
			return 0, err
		}
		if l == "PING\r\n" {
			if _, err := io.WriteString(nc, "PONG\r\n"); err != nil {
				return 0, err
			}
			continue
		}
		got++
	}
	return rate, nil
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// attacker is one kind of hostile pre-auth behaviour on one connection;
// it returns when the server closed the connection (or stop closed).
type attacker func(nc net.Conn, r *bufio.Reader, stop <-chan struct{})

func waitClosed(nc net.Conn, r *bufio.Reader) {
	_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, _ = io.Copy(io.Discard, r)
}

var attackers = []struct {
	name    string
	run     attacker
	sources int // attacking addresses (10 unless set)
}{
	{"idle", func(nc net.Conn, r *bufio.Reader, _ <-chan struct{}) { waitClosed(nc, r) }, 0},
	{"huge_line", func(nc net.Conn, r *bufio.Reader, _ <-chan struct{}) {
		_, _ = io.WriteString(nc, "CONNECT {\"name\":\""+strings.Repeat("a", 64<<10))
		waitClosed(nc, r)
	}, 0},
	{"huge_size", func(nc net.Conn, r *bufio.Reader, _ <-chan struct{}) {
		_, _ = io.WriteString(nc, "PUB x 2000000000\r\n")
		waitClosed(nc, r)
	}, 0},
	{"slowloris", func(nc net.Conn, r *bufio.Reader, stop <-chan struct{}) {
		closed := make(chan struct{})
		go func() { waitClosed(nc, r); close(closed) }()
		msg := `CONNECT {"user":"app","pass":"pw"}`
		for i := 0; i < len(msg); i++ {
			if _, err := nc.Write([]byte{msg[i]}); err != nil {
				break
			}
			select {
			case <-closed:
				return
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		<-closed
	}, 0},
	{"wrong_password", func(nc net.Conn, r *bufio.Reader, _ <-chan struct{}) {
		_, _ = io.WriteString(nc, `CONNECT {"user":"app","pass":"wrong"}`+"\r\n")
		waitClosed(nc, r)
	}, 0},
	// guessing: a new wrong password each time (no cache can answer it).
	{"guessing", guess, 0},
	// guessing_spread: the same from 1,000 addresses, one per connection.
	{"guessing_spread", guess, 1000},
}

func guess(nc net.Conn, r *bufio.Reader, _ <-chan struct{}) {
	_, _ = io.WriteString(nc, `CONNECT {"user":"app","pass":"guess`+strconv.FormatUint(guesses.Add(1), 10)+`"}`+"\r\n")
	waitClosed(nc, r)
}

// guesses numbers the guessing attackers' passwords.
var guesses atomic.Uint64

// attack keeps n connections of one kind going from 10 source addresses
// (127.0.0.2-11), or from sources addresses (127.2.x.y): each, once
// closed, is opened again after a second.
func attack(addr string, n, sources int, run attacker, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := fmt.Sprintf("127.0.0.%d", 2+i%10)
			if sources > 0 {
				k := i % sources
				src = fmt.Sprintf("127.2.%d.%d", k/250, 1+k%250)
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				if nc, err := dialFrom(src, addr, 0); err == nil {
					r := bufio.NewReader(nc)
					go func() { <-stop; nc.Close() }()
					run(nc, r, stop)
					nc.Close()
				}
				select {
				case <-stop:
					return
				case <-time.After(time.Second):
				}
			}
		}()
	}
	return &wg
}

// newUsers are the accounts whose first login is measured from an address
// never seen (their passwords are not in any cache): new1..new5, password
// "pw-<name>".
var newUsers = []string{"new1", "new2", "new3", "new4", "new5"}

// usersConfig returns user app (password pw) and newUsers with bcrypt
// cost-10 hashes.
func usersConfig(t *testing.T) []map[string]any {
	t.Helper()
	hash := func(pw string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(pw), 10)
		if err != nil {
			t.Fatal(err)
		}
		return string(h)
	}
	us := []map[string]any{{"name": "app", "password_bcrypt": hash("pw")}}
	for _, u := range newUsers {
		us = append(us, map[string]any{"name": u, "password_bcrypt": hash("pw-" + u)})
	}
	return us
}

// startLong starts `fibril serve` with user app (password pw, bcrypt cost
// 10) and newUsers, and returns it.
func startLong(t *testing.T, extra ...string) (addr string, pid int) {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "fibril.json")
	b, _ := json.Marshal(map[string]any{"users": usersConfig(t)})
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// With FIBRIL_ADVERSARIAL_PROFILE=dir, the server writes a CPU profile
	// of its whole run to dir/<test name>.cpu.pprof (cmd/fibril's
	// FIBRIL_TEST_CPUPROFILE hook); it is stopped gracefully so it does.
	profDir := os.Getenv("FIBRIL_ADVERSARIAL_PROFILE")
	if profDir != "" {
		t.Setenv("FIBRIL_TEST_CPUPROFILE", filepath.Join(profDir, strings.ReplaceAll(t.Name(), "/", "_")+".cpu.pprof"))
	}
	p := startFibril(t, filepath.Join(dir, "data"), append([]string{"--config", cfg, "--log-level", "error"}, extra...)...)
	if profDir != "" {
		t.Cleanup(func() { _ = p.Stop(false) }) // before startFibril's kill
	}
	return p.Addr, p.PID()
}

// peerBin: with -peer <nats-server binary>, the pre-auth long form runs
// every attack against nats-server too, side by side (issue 23: what part
// of a client's loss is the load generator's, what part the server's).
var peerBin = flag.String("peer", "", "nats-server binary to run the pre-auth attacks against too")

// startPeer starts nats-server with the same users (bcrypt cost 10) on a
// free loopback port.
func startPeer(t *testing.T) (addr string, pid int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
	_ = ln.Close()
	var users []string
	for _, u := range usersConfig(t) {
		users = append(users, fmt.Sprintf("{user: %q, password: %q}", u["name"], u["password_bcrypt"]))
	}
	cfg := filepath.Join(t.TempDir(), "nats.conf")
	conf := fmt.Sprintf("listen: %q\nauthorization { users = [%s] }\n", addr, strings.Join(users, ", "))
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(*peerBin, "-c", cfg)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return addr, cmd.Process.Pid
		}
		if time.Now().After(deadline) {
			t.Fatal("nats-server did not listen")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pinned: with FIBRIL_ADVERSARIAL_PIN=1 the server runs on CPU 0 and this
// process (the attackers and the measured client) on CPU 1, so the load
// generator cannot take the server's CPU.
func pin(t *testing.T, pid int) {
	t.Helper()
	if os.Getenv("FIBRIL_ADVERSARIAL_PIN") == "" {
		return
	}
	for _, c := range [][]string{{"-a", "-p", "-c", "0", strconv.Itoa(pid)}, {"-a", "-p", "-c", "1", strconv.Itoa(os.Getpid())}} {
		if out, err := exec.Command("taskset", c...).CombinedOutput(); err != nil {
			t.Fatalf("taskset %v: %v %s", c, err, out)
		}
	}
}

// With FIBRIL_ADVERSARIAL_GEN=nice the attackers run in a process of their
// own at the lowest priority (nice 19), as if on other machines: the
// measured client then competes with the server's work for the attack,
// not with the generator's (in one process, the 1,000 attackers and the
// client share GOMAXPROCS).
func startGenerator(t *testing.T, addr, kind string) int {
	t.Helper()
	cmd := exec.Command("nice", "-n", "19", os.Args[0], "-test.run", "^TestAdversarialGenerator$")
	cmd.Env = append(os.Environ(), "FIBRIL_ADVERSARIAL_GENERATE="+addr+" "+kind)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close() // the generator stops when its stdin closes
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return cmd.Process.Pid
}

// TestAdversarialGenerator is the generator process of startGenerator:
// 1,000 attackers of one kind against one address until stdin closes.
func TestAdversarialGenerator(t *testing.T) {
	spec := os.Getenv("FIBRIL_ADVERSARIAL_GENERATE")
	if spec == "" {
		t.Skip("the attack generator of the adversarial long form (FIBRIL_ADVERSARIAL_GEN=nice)")
	}
	addr, kind, _ := strings.Cut(spec, " ")
	for _, a := range attackers {
		if a.name != kind {
			continue
		}
		stop := make(chan struct{})
		wg := attack(addr, 1000, a.sources, a.run, stop)
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stop)
		wg.Wait()
		return
	}
	t.Fatalf("no attack %q", kind)
}

// TestAdversarialPreAuthLong: 1,000 hostile pre-auth connections of each
// kind against a logged-in client's publish throughput, the server's RSS
// and a new login's time: from an address that logged in before (app),
// and the first login of a user never seen, from an address never seen.
func TestAdversarialPreAuthLong(t *testing.T) {
	longForm(t)
	servers := []string{"fibril"}
	if *peerBin != "" {
		servers = append(servers, "nats-server")
	}
	for _, a := range attackers {
		for _, srv := range servers {
			t.Run(a.name+"/"+srv, func(t *testing.T) { preAuthAttack(t, a.name, a.run, a.sources, srv) })
		}
	}
}

func preAuthAttack(t *testing.T, kind string, run attacker, sources int, srv string) {
	var (
		addr, topic string
		pid         int
		mode        = `"fibril":1,`
	)
	if srv == "fibril" {
		addr, pid = startLong(t)
		topic = "bench"
	} else {
		addr, pid = startPeer(t)
		topic, mode = "bench.plain", `"verbose":true,`
	}
	pin(t, pid)
	nc, r, _, err := loginAs(addr, "127.0.0.1", mode, "app", "pw")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if srv == "fibril" {
		if _, err := io.WriteString(nc, `TOPIC CREATE bench {"durability":"none","retention":"limits","max_bytes":67108864}`+"\r\n"); err != nil {
			t.Fatal(err)
		}
		if l, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(l, "+OK ") {
			t.Fatalf("TOPIC CREATE: %q %v", l, err)
		}
	}
	starved := false // the client got no confirm for 12 s (the peer, under bcrypt load)
	rates := func() float64 {
		var v []float64
		for range 3 {
			if starved {
				return 0
			}
			rate, err := publishRate(nc, r, topic, 2*time.Second)
			if err != nil {
				if srv == "fibril" {
					t.Fatal(err)
				}
				t.Logf("%s vs %s: the logged-in client: %v", kind, srv, err)
				starved = true
				return 0
			}
			v = append(v, rate)
		}
		return median(v)
	}
	base := rates()
	rssBase := procStatus(t, pid)["VmRSS"]
	stop := make(chan struct{})
	var wg *sync.WaitGroup
	gen := 0 // the generator's process when it runs apart
	if os.Getenv("FIBRIL_ADVERSARIAL_GEN") == "nice" {
		gen = startGenerator(t, addr, kind)
	} else {
		wg = attack(addr, 1000, sources, run, stop)
	}
	time.Sleep(2 * time.Second) // every attacker connected at least once
	// What the attack alone costs the server, before the client publishes
	// again: a figure the machine's other load moves less than the rates.
	aloneCPU, tA := cpuSeconds(pid), time.Now()
	time.Sleep(2 * time.Second)
	aloneCPU = (cpuSeconds(pid) - aloneCPU) / time.Since(tA).Seconds()
	srvCPU, ownCPU, genCPU, t0 := cpuSeconds(pid), cpuSeconds(0), cpuSeconds(gen), time.Now()
	under := rates()
	wall := time.Since(t0).Seconds()
	srvCPU, ownCPU = (cpuSeconds(pid)-srvCPU)/wall, (cpuSeconds(0)-ownCPU)/wall
	if gen != 0 {
		ownCPU += (cpuSeconds(gen) - genCPU) / wall
	}
	var known, fresh []time.Duration
	busy := 0
	for i := range 5 {
		lc, _, took, err := loginAs(addr, "127.0.0.1", mode, "app", "pw")
		if err != nil {
			if srv == "fibril" {
				t.Errorf("login during the attack: %v", err)
			} else {
				t.Logf("login during the attack: %v", err)
			}
		} else {
			lc.Close()
			known = append(known, took)
		}
		u := newUsers[i]
		lc, _, took, err = loginAs(addr, fmt.Sprintf("127.0.1.%d", 1+i), mode, u, "pw-"+u)
		switch {
		case err == nil:
			lc.Close()
		case strings.Contains(err.Error(), "auth_busy"):
			busy++ // refused at once, retriable
		default:
			t.Logf("first login of %s from a new address during the attack: %v", u, err)
			took = 10 * time.Second
		}
		fresh = append(fresh, took)
	}
	st := procStatus(t, pid)
	close(stop)
	if wg != nil {
		wg.Wait()
	}
	peakGrowth := st["VmHWM"] - rssBase
	slowest := func(ds []time.Duration) time.Duration {
		var w time.Duration
		for _, d := range ds {
			w = max(w, d)
		}
		return w
	}
	t.Logf("%s vs %s: publish %.0f/s alone, %.0f/s under attack (%.0f %%); RSS %d MiB before, peak %d MiB (+%d MiB); logins from a known address %v, first logins from new addresses %v (%d refused auth_busy); the attack alone cost the server %.3f CPUs; under attack the server used %.2f CPUs, the attackers and client %.2f",
		kind, srv, base, under, 100*under/base, rssBase>>10, st["VmHWM"]>>10, peakGrowth>>10, known, fresh, busy, aloneCPU, srvCPU, ownCPU)
	if srv != "fibril" {
		return // the peer is measured, not judged
	}
	// Pinned, the measured client shares one CPU with the attackers: the
	// run shows whose CPU the loss is, and is not judged on it.
	if under < 0.8*base && os.Getenv("FIBRIL_ADVERSARIAL_PIN") == "" {
		t.Errorf("%s: throughput under attack %.0f %% of baseline, want >= 80 %%", kind, 100*under/base)
	}
	if peakGrowth > 100<<10 {
		t.Errorf("%s: peak RSS grew by %d MiB, want <= 100", kind, peakGrowth>>10)
	}
	if worst := slowest(known); worst > time.Second || len(known) == 0 {
		t.Errorf("%s: slowest login from a known address %s, want <= 1s", kind, worst)
	}
	// The first login of a user never seen from an address never seen:
	// under a second, and not refused, also while the attack guesses from
	// 1,000 addresses (each of which has failed by then, so a new address
	// goes ahead of them: server/authqueue.go).
	limit := time.Second
	if worst := slowest(fresh); worst > limit || busy > 0 {
		t.Errorf("%s: first logins from new addresses %v (%d refused auth_busy), want each within %s", kind, fresh, busy, limit)
	}
}

// TestAdversarialStalledConsumersLong: a consumer of each kind that stops
// reading while 256 MiB are published: the server's anonymous memory stays
// under max_pending (64 MiB) + 64 MiB, the consumer is cut within the
// write deadline of the backlog reaching it, and every message reaches
// another consumer (or, settled when written, the stalled one's socket).
func TestAdversarialStalledConsumersLong(t *testing.T) {
	longForm(t)
	// consume is sent before the publishes, after is sent after them (a
	// POLL without wait-ms is answered at once, with what is there).
	kinds := []struct{ name, connect, consume, after string }{
		{"fibril_push", `{"fibril":1,"user":"app","pass":"pw"}`, "SUB st g 1 2147483647\r\n", ""},
		{"fibril_poll", `{"fibril":1,"user":"app","pass":"pw"}`, "", strings.Repeat("POLL st g 1024\r\n", 64)},
		{"nats_push_auto", `{"user":"app","pass":"pw"}`, "SUB st g 1\r\n", ""},
	}
	const msgs, size = 8192, 32 << 10
	body := strings.Repeat("s", size-8)
	// publishAll publishes the messages, 64 confirms at a time, while
	// sampling the server's anonymous memory; it returns the peak (KiB).
	publishAll := func(t *testing.T, pid int, ctl net.Conn, cr *bufio.Reader) int64 {
		var peak atomic.Int64
		sampling := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				select {
				case <-sampling:
					return
				case <-time.After(100 * time.Millisecond):
				}
				if a := procStatus(t, pid)["RssAnon"]; a > peak.Load() {
					peak.Store(a)
				}
			}
		}()
		for i := range msgs {
			if _, err := fmt.Fprintf(ctl, "PUB st %d\r\n%08d%s\r\n", size, i, body); err != nil {
				t.Fatal(err)
			}
			if i%64 == 63 {
				for range 64 {
					if l, err := cr.ReadString('\n'); err != nil || !strings.HasPrefix(l, "+OK ") {
						t.Fatalf("publish: %q %v", l, err)
					}
				}
			}
		}
		close(sampling)
		<-sampled
		return peak.Load()
	}
	setup := func(t *testing.T) (string, int, net.Conn, *bufio.Reader) {
		addr, pid := startLong(t)
		ctl, cr, _, err := login(addr, "127.0.0.1", "pw")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ctl.Close() })
		_, _ = io.WriteString(ctl, `TOPIC CREATE st {"durability":"none"}`+"\r\nGROUP CREATE st g\r\n")
		for range 2 {
			if l, err := cr.ReadString('\n'); err != nil || !strings.HasPrefix(l, "+OK ") {
				t.Fatalf("setup: %q %v", l, err)
			}
		}
		return addr, pid, ctl, cr
	}
	var controlAnon int64
	t.Run("control", func(t *testing.T) {
		_, pid, ctl, cr := setup(t)
		controlAnon = publishAll(t, pid, ctl, cr)
		t.Logf("the publishes alone: peak anonymous RSS %d MiB", controlAnon>>10)
	})
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			addr, pid, ctl, cr := setup(t)
			stalled, err := dialFrom("127.0.0.1", addr, 4096)
			if err != nil {
				t.Fatal(err)
			}
			defer stalled.Close()
			_, _ = io.WriteString(stalled, "CONNECT "+k.connect+"\r\n"+k.consume)
			time.Sleep(500 * time.Millisecond) // the password check
			var peakAnon atomic.Int64
			peakAnon.Store(publishAll(t, pid, ctl, cr))
			if k.after != "" {
				var pk atomic.Int64
				_, _ = io.WriteString(stalled, k.after)
				for range 30 { // the answers pile up: sample while they do
					time.Sleep(100 * time.Millisecond)
					if a := procStatus(t, pid)["RssAnon"]; a > pk.Load() {
						pk.Store(a)
					}
				}
				peakAnon.Store(max(peakAnon.Load(), pk.Load()))
			}
			published := time.Now()
			// Reading would unstall it: wait for the cut without reading
			// (the write deadline, 10 s, and some slack), then read what
			// reached its socket before it; the rest must arrive at once.
			time.Sleep(13 * time.Second)
			onSocket := map[int]bool{}
			_ = stalled.SetReadDeadline(time.Now().Add(5 * time.Second))
			all, rerr := io.ReadAll(stalled)
			cut := time.Since(published)
			var ne net.Error
			if errors.As(rerr, &ne) && ne.Timeout() {
				t.Errorf("%s: the stalled connection was not cut within the write deadline", k.name)
			}
			for _, m := range strings.Split(string(all), "\r\n") {
				if len(m) == size && m[8] == 's' {
					if i, err := strconv.Atoi(m[:8]); err == nil {
						onSocket[i] = true
					}
				}
			}
			// Everything else reaches another consumer.
			got := map[int]bool{}
			lostNow := func() int {
				n := 0
				for i := range msgs {
					if !got[i] && !(k.name == "nats_push_auto" && onSocket[i]) {
						n++
					}
				}
				return n
			}
			for empty := 0; empty < 3 && lostNow() > 0; {
				if _, err := io.WriteString(ctl, "POLL st g 128 1000\r\n"); err != nil {
					t.Fatal(err)
				}
				var hs []string
				for {
					l, err := cr.ReadString('\n')
					if err != nil {
						t.Fatal(err)
					}
					if strings.HasPrefix(l, "+OK") {
						break
					}
					f := strings.Fields(l)
					n, _ := strconv.Atoi(f[len(f)-1])
					b := make([]byte, n+2)
					if _, err := io.ReadFull(cr, b); err != nil {
						t.Fatal(err)
					}
					i, _ := strconv.Atoi(string(b[:8]))
					got[i] = true
					hs = append(hs, f[3])
				}
				if len(hs) == 0 {
					empty++
					continue
				}
				empty = 0
				_, _ = io.WriteString(ctl, "ACK "+strings.Join(hs, " ")+"\r\n")
				if l, err := cr.ReadString('\n'); err != nil || strings.TrimSpace(l) != "+OK" {
					t.Fatalf("ACK: %q %v", l, err)
				}
			}
			lost := lostNow()
			st := procStatus(t, pid)
			t.Logf("%s: %d MiB published; peak anonymous RSS %d MiB (VmHWM %d MiB; the same publishes with no consumer: %d MiB); %d on the stalled socket, %d to another consumer, %d lost",
				k.name, msgs*size>>20, peakAnon.Load()>>10, st["VmHWM"]>>10, controlAnon>>10, len(onSocket), len(got), lost)
			_ = cut
			// SPEC.md's bound: the server's memory stays under max_pending
			// (64 MiB) + 64 MiB. And the output held for the consumer costs
			// its bytes, not twice them (+80 to +120 MiB before the outbox
			// was held once, in full chunks): the publishing itself takes
			// what the control run shows, the stalled consumer may add
			// max_pending and a little (the transport's window, chunks).
			if peakAnon.Load() > (64+64)<<10 {
				t.Errorf("%s: peak anonymous RSS %d MiB, want <= max_pending 64 MiB + 64 MiB", k.name, peakAnon.Load()>>10)
			}
			if grow := peakAnon.Load() - controlAnon; grow > (64+12)<<10 {
				t.Errorf("%s: peak anonymous RSS %d MiB, %d MiB over the same publishes without a consumer; want <= max_pending 64 MiB + 12 MiB",
					k.name, peakAnon.Load()>>10, grow>>10)
			}
			if lost > 0 {
				t.Errorf("%s: %d messages neither on the stalled socket (settled when written) nor delivered again", k.name, lost)
			}
		})
	}
}
