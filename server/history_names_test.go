package server

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/admin"
)

// pollOne POLLs one message of jobs/w on w and returns its ack handle.
func pollOne(w *wireConn, body string) string {
	w.t.Helper()
	l := w.expectAfter("POLL jobs w 1\r\n", `^MSG jobs \S+ (\$F\.\S+) \d+`)
	w.expectBody(body)
	w.expect(`^\+OK 1$`)
	return regexp.MustCompile(`\$F\.\S+`).FindString(l)
}

func (w *wireConn) expectAfter(send, re string) string {
	w.t.Helper()
	w.send(send)
	return w.expect(re)
}

// TestHistoryNamesConnections: two named connections each get a delivery;
// the admin history names the connection each went to (live, and after it
// closed), and says how each delivery ended.
func TestHistoryNamesConnections(t *testing.T) {
	s := startServer(t, func(o *Options) {
		durableFiles(o)
		o.HTTPListen = "127.0.0.1:0"
	})
	base := "http://" + s.HTTPAddr().String() + "/api/topics/jobs/partitions/0/messages/"

	ctl := dialInfo(t, s)
	ctl.send(`CONNECT {"fibril":1,"name":"ctl"}` + "\r\n")
	ctl.expect(`^\+OK$`)
	ctl.send("TOPIC CREATE jobs\r\n")
	ctl.expect(`^\+OK `)
	ctl.send(`GROUP CREATE jobs w {"lease_ms":60000}` + "\r\n")
	ctl.expect(`^\+OK `)
	ctl.send("PUB jobs 2\r\nm1\r\nPUB jobs 2\r\nm2\r\n")
	ctl.expect(`^\+OK 0:1$`)
	ctl.expect(`^\+OK 0:2$`)

	workers := map[string]*wireConn{}
	handles := map[string]string{}
	for i, name := range []string{"worker-a", "worker-b"} {
		w := dialInfo(t, s)
		w.send(`CONNECT {"fibril":1,"name":"` + name + `"}` + "\r\n")
		w.expect(`^\+OK$`)
		workers[name] = w
		handles[name] = pollOne(w, fmt.Sprint("m", i+1))
	}
	workers["worker-a"].send("ACK " + handles["worker-a"] + "\r\n")
	workers["worker-a"].expect(`^\+OK$`)
	workers["worker-b"].nc.Close() // its lease is released

	history := func(seq int) (admin.History, []string) {
		var h admin.History
		code, body := httpGet(t, base+fmt.Sprint(seq)+"/history", "")
		if code != 200 {
			t.Fatalf("history %d: %d %s", seq, code, body)
		}
		if err := json.Unmarshal(body, &h); err != nil {
			t.Fatalf("history %d: %v: %s", seq, err, body)
		}
		var lines []string
		for _, e := range h.Events {
			lines = append(lines, e.Kind+"/"+e.Reason+"/"+e.OwnerLabel)
		}
		return h, lines
	}
	remote := func(name string) string { return workers[name].nc.LocalAddr().String() }
	a := "conn %d (worker-a, " + remote("worker-a") + ")"
	var h1 admin.History
	var got []string
	waitFor(t, 5*time.Second, "history of 1 naming worker-a", func() bool {
		h1, got = history(1)
		return len(h1.Events) == 2
	})
	id := uint64(h1.Events[0].Owner)
	if want := []string{"deliver//" + fmt.Sprintf(a, id), "settle/ack/" + fmt.Sprintf(a, id)}; !slices.Equal(got, want) {
		t.Fatalf("history of 1\n got %q\nwant %q", got, want)
	}
	if c := h1.Events[0].Conn; c == nil || c.ID != id || c.Name != "worker-a" || !c.Open {
		t.Fatalf("history of 1: conn %+v", c)
	}

	b := "conn %d (worker-b, " + remote("worker-b") + ", closed)"
	var h2 admin.History
	waitFor(t, 5*time.Second, "history of 2: released by closed worker-b", func() bool {
		h2, got = history(2)
		return len(h2.Events) == 2 && h2.Events[0].Conn != nil && !h2.Events[0].Conn.Open
	})
	idb := uint64(h2.Events[0].Owner)
	if idb == id || idb == 0 {
		t.Fatalf("worker-b owner %d (worker-a %d)", idb, id)
	}
	if want := []string{"deliver//" + fmt.Sprintf(b, idb), "release//" + fmt.Sprintf(b, idb)}; !slices.Equal(got, want) {
		t.Fatalf("history of 2\n got %q\nwant %q", got, want)
	}
	if ref, ok := s.LookupConn(idb); !ok || ref.Name != "worker-b" || ref.Open {
		t.Fatalf("LookupConn(%d) = %+v, %v", idb, ref, ok)
	}
	if _, ok := s.LookupConn(1 << 40); ok {
		t.Fatal("LookupConn of an unknown id succeeded")
	}
}

// TestClosedConnsRing: the ring keeps the last limit closed connections.
func TestClosedConnsRing(t *testing.T) {
	var r closedConns
	for id := uint64(1); id <= 10; id++ {
		r.add(admin.ConnRef{ID: id, Name: fmt.Sprint("c", id)}, 4)
	}
	for id := uint64(1); id <= 10; id++ {
		ref, ok := r.get(id)
		if want := id > 6; ok != want || (ok && ref.Name != fmt.Sprint("c", id)) {
			t.Errorf("get(%d) = %+v, %v; want kept=%v", id, ref, ok, want)
		}
	}
	if len(r.ring) != 4 || len(r.byID) != 4 {
		t.Fatalf("ring %d entries, index %d", len(r.ring), len(r.byID))
	}
}
