package e2e

import (
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fibrilmq/fibril/protocol"
)

// pollAck polls the group once (batch 100, wait waitMs) and acks what
// came; it returns the message indexes delivered and whether the ACK was
// confirmed (+OK). sent, when not nil, is called before each ACK line is
// written with the indexes it acks. An error means the connection is gone.
func pollAck(c *client, waitMs string, sent func([]int)) (got []int, acked bool, err error) {
	if _, err := c.nc.Write([]byte("POLL e2e g 100 " + waitMs + "\r\n")); err != nil {
		return nil, false, err
	}
	var handles []string
	for {
		f, err := c.next()
		if err != nil {
			return got, false, err
		}
		if f.Op == protocol.OpOK {
			break
		}
		if f.Op != protocol.OpMsg {
			c.t.Errorf("poll answer %v %q", f.Op, f.Text)
			return got, false, nil
		}
		i, ok := indexOf(f.Payload)
		if !ok {
			c.t.Errorf("invented or damaged message %q", f.Payload)
			return got, false, nil
		}
		got = append(got, i)
		handles = append(handles, string(f.Reply))
	}
	for from := 0; from < len(handles); {
		k := min(len(handles)-from, 40)
		if sent != nil {
			sent(got[from : from+k])
		}
		if _, err := c.nc.Write([]byte("ACK " + strings.Join(handles[from:from+k], " ") + "\r\n")); err != nil {
			return got, false, err
		}
		f, err := c.next()
		if err != nil {
			return got, false, err
		}
		if f.Op != protocol.OpOK {
			c.t.Errorf("ack: %v %q", f.Op, f.Text)
			return got, false, nil
		}
		from += k
	}
	return got, true, nil
}

// TestSIGKILLWhileSegmentsRecycle: with 64 KiB segments a work queue whose
// consumer keeps up rolls, truncates and recycles segment files all the
// time. A SIGKILL in the middle loses no confirmed message, brings back no
// message whose ACK was confirmed, and the restarted server never hands
// out a sequence number again.
func TestSIGKILLWhileSegmentsRecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	const n = 60000
	dir := t.TempDir()
	args := []string{"--segment-size", "262144", "--max-payload", "65536", "--event-segment-size", "65536"}
	p := startFibril(t, dir, args...)
	pub := crcClient(t, p.Addr, `TOPIC CREATE e2e {"retention":"workqueue"}`, `GROUP CREATE e2e g {"lease_ms":500}`)
	con := crcClient(t, p.Addr)
	// The consumer's view: ackSent, an ACK of the message was written (the
	// server may have applied it even if the +OK never came); acked, its
	// ACK was confirmed.
	ackSent, acked := make([]bool, n), make([]bool, n)
	conDone := make(chan struct{})
	go func() {
		defer close(conDone)
		for {
			got, ok, err := pollAck(con, "50", func(idx []int) {
				for _, i := range idx {
					ackSent[i] = true
				}
			})
			if ok {
				for _, i := range got {
					acked[i] = true
				}
			}
			if err != nil || t.Failed() {
				return
			}
		}
	}()

	killAt := n/4 + rand.IntN(n/2)
	window, stop := publishAll(pub, n, 10) // about 6 s in all: retention runs every second
	defer stop()
	confirmed := make([]bool, n)
	nConfirmed := 0
	var maxSeq uint64
	for i := range n {
		f, err := pub.next()
		if err != nil {
			break // the server is gone
		}
		<-window
		pos, stored, err := protocol.ParseConfirm(f.Text)
		if f.Op != protocol.OpOK || err != nil || !stored {
			t.Fatalf("confirm %d: %v %q %v", i, f.Op, f.Text, err)
		}
		confirmed[i] = true
		nConfirmed++
		maxSeq = max(maxSeq, pos.Seq)
		if nConfirmed == killAt {
			_ = p.Stop(true) // SIGKILL, and wait until it is gone
		}
	}
	pub.close()
	_ = p.Stop(true)
	<-conDone
	con.close()
	nAcked := 0
	for _, a := range acked {
		if a {
			nAcked++
		}
	}
	t.Logf("killed after %d confirms (target %d), %d acks confirmed, last seq %d", nConfirmed, killAt, nAcked, maxSeq)
	segs, spares, lowest := segmentFiles(t, dir)
	t.Logf("on disk after the kill: %d segment files (lowest %s), %d spares", segs, lowest, spares)
	if nAcked == 0 || strings.HasPrefix(lowest, "00000000000000000001.") {
		t.Fatal("nothing was truncated before the kill: the test did not exercise recycling")
	}

	p2 := startFibril(t, dir, args...)
	r := crcClient(t, p2.Addr)
	defer r.close()
	got := make([]int, n)
	// Deliveries leased when the server died come back once their lease
	// (500 ms) ends: drain until two POLLs of 1 s came back empty.
	for empty := 0; empty < 2; {
		idx, _, err := pollAck(r, "1000", nil)
		if err != nil {
			t.Fatalf("poll after restart: %v", err)
		}
		if len(idx) == 0 {
			empty++
		}
		for _, i := range idx {
			got[i]++
		}
	}
	lost, back := 0, 0
	for i := range n {
		if confirmed[i] && !ackSent[i] && got[i] == 0 {
			lost++
			if lost < 10 {
				t.Errorf("confirmed message %d, never acked, lost", i)
			}
		}
		if acked[i] && got[i] > 0 {
			back++
			if back < 10 {
				t.Errorf("message %d delivered again after its ACK was confirmed", i)
			}
		}
	}
	if lost > 0 || back > 0 {
		t.Fatalf("%d confirmed messages lost, %d acked messages back", lost, back)
	}
	// Numbering goes on after the last number handed out before the kill.
	buf := protocol.AppendPub(nil, "e2e", "", payload(n), protocol.ComputeCRC)
	if _, err := r.nc.Write(buf); err != nil {
		t.Fatal(err)
	}
	f, err := r.next()
	pos, stored, perr := protocol.ParseConfirm(f.Text)
	if err != nil || perr != nil || !stored || pos.Seq <= maxSeq {
		t.Fatalf("publish after restart: %q (%v %v): want a sequence number above %d", f.Text, err, perr, maxSeq)
	}
}

// segmentFiles looks at the busiest data log under dir (the one whose
// newest segment starts highest: the test's topic, not a dead-letter or
// system topic): its segment files, its spare files and its lowest
// segment's name.
func segmentFiles(t *testing.T, dir string) (segs, spares int, lowest string) {
	t.Helper()
	type logDir struct {
		segs, spares    int
		lowest, highest string
	}
	logs := map[string]*logDir{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(filepath.Dir(path)) != "data" {
			return err
		}
		ld := logs[filepath.Dir(path)]
		if ld == nil {
			ld = &logDir{}
			logs[filepath.Dir(path)] = ld
		}
		switch name := d.Name(); {
		case strings.HasSuffix(name, ".seg"):
			ld.segs++
			if ld.lowest == "" || name < ld.lowest {
				ld.lowest = name
			}
			ld.highest = max(ld.highest, name)
		case strings.HasSuffix(name, ".spare.tmp"):
			ld.spares++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var busiest *logDir
	for _, ld := range logs {
		if busiest == nil || ld.highest > busiest.highest {
			busiest = ld
		}
	}
	if busiest == nil {
		t.Fatal("no data log found")
	}
	return busiest.segs, busiest.spares, busiest.lowest
}
