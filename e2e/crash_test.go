package e2e

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

// payload is message i's body: self-describing, so a consumer can tell a
// real message from an invented or damaged one.
func payload(i int) []byte {
	r := rand.New(rand.NewPCG(uint64(i), 42))
	b := []byte("m-" + strconv.Itoa(i) + "-")
	for range 40 + r.IntN(200) {
		b = append(b, byte('a'+r.IntN(26)))
	}
	return b
}

// crcClient connects to addr with CRC tokens on (and checked on what it
// reads), sends each setup line and expects +OK for it.
func crcClient(t *testing.T, addr string, setup ...string) *client {
	t.Helper()
	c, err := dialClient(t, addr, `{"fibril":1,"crc":true}`)
	if err != nil {
		t.Fatal(err)
	}
	c.p.SetCRC(true)
	for _, line := range setup {
		if _, err := c.nc.Write([]byte(line + "\r\n")); err != nil {
			t.Fatal(err)
		}
		if f, err := c.next(); err != nil || f.Op != protocol.OpOK {
			t.Fatalf("%s: %v %q %v", line, f.Op, f.Text, err)
		}
	}
	return c
}

// publishAll publishes messages 0..n-1 to topic e2e on c from a goroutine,
// at most 256 unconfirmed: the caller takes one token from window per
// confirm it reads. With pause > 0 it sleeps 1 ms after every pause
// messages. stop ends the goroutine.
func publishAll(c *client, n, pause int) (window chan struct{}, stop func()) {
	window = make(chan struct{}, 256)
	quit := make(chan struct{})
	go func() {
		var buf []byte
		for i := range n {
			select {
			case window <- struct{}{}:
			case <-quit:
				return
			}
			buf = protocol.AppendPub(buf[:0], "e2e", "", payload(i), protocol.ComputeCRC)
			if _, err := c.nc.Write(buf); err != nil {
				return
			}
			if pause > 0 && i%pause == pause-1 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	return window, func() { close(quit) }
}

func indexOf(p []byte) (int, bool) {
	s := strings.TrimPrefix(string(p), "m-")
	n, _, ok := strings.Cut(s, "-")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(n)
	if err != nil || i < 0 {
		return 0, false
	}
	return i, bytes.Equal(p, payload(i))
}

// TestSIGKILLKeepsConfirmedMessages publishes with confirms, kills the
// server with SIGKILL at a random moment, restarts it on the same data and
// consumes everything: every confirmed message arrives, intact (CRC checked
// by the parser), and nothing arrives that was never published.
func TestSIGKILLKeepsConfirmedMessages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	const n = 4000
	dir := t.TempDir()
	p := startFibril(t, dir)
	c := crcClient(t, p.Addr, `TOPIC CREATE e2e {"partitions":2}`, "GROUP CREATE e2e g")

	killAt := n/5 + rand.IntN(3*n/5)
	window, stop := publishAll(c, n, 0)
	defer stop()
	confirmed := make([]bool, n)
	nConfirmed := 0
	for i := range n {
		f, err := c.next()
		if err != nil {
			break // the server is gone
		}
		<-window
		switch {
		case f.Op == protocol.OpOK && len(f.Text) > 0 && f.Text[0] != '-':
			if _, stored, err := protocol.ParseConfirm(f.Text); err != nil || !stored {
				t.Fatalf("confirm %d: %q %v", i, f.Text, err)
			}
			confirmed[i] = true
			nConfirmed++
		default:
			t.Fatalf("answer %d: %v %q", i, f.Op, f.Text)
		}
		if nConfirmed == killAt {
			_ = p.Stop(true) // SIGKILL, and wait until it is gone
		}
	}
	c.close()
	_ = p.Stop(true) // a no-op after the kill above; ends the server if the loop broke first
	t.Logf("killed after %d confirms (target %d)", nConfirmed, killAt)

	p2 := startFibril(t, dir)
	r := crcClient(t, p2.Addr)
	defer r.close()
	got := make([]int, n)
	empty := 0
	for empty < 2 {
		if _, err := r.nc.Write([]byte("POLL e2e g 500 300\r\n")); err != nil {
			t.Fatal(err)
		}
		var handles []string
		for {
			f, err := r.next()
			if err != nil {
				t.Fatalf("poll: %v", err)
			}
			if f.Op == protocol.OpOK {
				break
			}
			if f.Op != protocol.OpMsg {
				t.Fatalf("poll answer %v %q", f.Op, f.Text)
			}
			i, ok := indexOf(f.Payload)
			if !ok || i >= n {
				t.Fatalf("invented or damaged message %q", f.Payload)
			}
			got[i]++
			handles = append(handles, string(f.Reply))
		}
		if len(handles) == 0 {
			empty++
			continue
		}
		// ACK in batches that fit the control line limit.
		for len(handles) > 0 {
			k := min(len(handles), 100)
			if _, err := r.nc.Write([]byte("ACK " + strings.Join(handles[:k], " ") + "\r\n")); err != nil {
				t.Fatal(err)
			}
			if f, err := r.next(); err != nil || f.Op != protocol.OpOK {
				t.Fatalf("ack: %v %q %v", f.Op, f.Text, err)
			}
			handles = handles[k:]
		}
	}
	missing, delivered := 0, 0
	for i := range n {
		if got[i] > 0 {
			delivered++
		}
		if confirmed[i] && got[i] == 0 {
			missing++
			if missing < 10 {
				t.Errorf("confirmed message %d lost", i)
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d confirmed messages lost", missing)
	}
	if nConfirmed < killAt {
		t.Fatalf("only %d confirms before the connection dropped, wanted the kill at %d", nConfirmed, killAt)
	}
	t.Logf("%d confirmed, %d distinct delivered after restart", nConfirmed, delivered)
}
