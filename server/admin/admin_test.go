package admin

import (
	"context"
	"errors"

	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/fibrilmq/fibril/server/access"
	"github.com/fibrilmq/fibril/server/broker"
)

func TestNewRejectsBadOptions(t *testing.T) {
	b := openBroker(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name string
		o    Options
		want error
	}{
		{"no addr", Options{Broker: staticBroker(b)}, ErrInvalidOptions},
		{"no broker", Options{Addr: "127.0.0.1:0"}, ErrInvalidOptions},
		{"bad addr", Options{Addr: "127.0.0.1:notaport", Broker: staticBroker(b)}, ErrListen},
		{"busy addr", Options{Addr: busy.Addr().String(), Broker: staticBroker(b)}, ErrListen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.o)
			if !errors.Is(err, tc.want) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("New: got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestCloseBeforeServeFreesAddress(t *testing.T) {
	b := openBroker(t)
	s, err := New(Options{Addr: "127.0.0.1:0", Broker: staticBroker(b)})
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Addr().String()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("address still bound after Close: %v", err)
	}
	ln.Close()
}

func TestHealthAndReadiness(t *testing.T) {
	b := openBroker(t)
	var open atomic.Bool
	s := startAdmin(t, Options{Broker: func() *broker.Broker {
		if open.Load() {
			return b
		}
		return nil
	}})
	for _, tc := range []struct {
		path string
		open bool
		want int
	}{
		{"/healthz", false, 200},
		{"/readyz", false, 503},
		{"/api/topics", false, 503},
		{"/healthz", true, 200},
		{"/readyz", true, 200},
		{"/api/topics", true, 200},
		{"/api/nope", true, 404},
	} {
		open.Store(tc.open)
		if code, body := get(t, s.URL()+tc.path); code != tc.want {
			t.Errorf("GET %s (engine open %v): %d, want %d: %s", tc.path, tc.open, code, tc.want, body)
		}
	}
}

func TestTopicsAndGroupsAPI(t *testing.T) {
	b := openBroker(t)
	s := startAdmin(t, Options{Broker: staticBroker(b), ServerName: "t1"})
	orders, err := b.CreateTopic("orders", broker.TopicConfig{Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	g, err := orders.Group("billing", broker.GroupConfig{MaxDeliveries: 1})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, orders, 10)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := g.Poll(ctx, 4)
	if err != nil || len(ds) < 2 {
		t.Fatalf("Poll: %d deliveries, %v; want at least 2", len(ds), err)
	}
	// Settle the first two (in order, so the ack floor passes both): one
	// ack, one reject that goes to the dead-letter topic.
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ds[1].Reject(ctx); err != nil {
		t.Fatal(err)
	}
	inflight := int64(len(ds) - 2)

	var ov Overview
	waitFor(t, 5*time.Second, "dead-letter topic with one message and settled stats", func() bool {
		getJSON(t, s.URL()+"/api/topics", &ov)
		var dl *TopicStats
		for i := range ov.Topics {
			if ov.Topics[i].Name == broker.DeadLetterTopic("orders", "billing") {
				dl = &ov.Topics[i]
			}
		}
		return dl != nil && dl.DeadLetter && dl.Published == 1 && dl.Messages == 1
	})
	if ov.Server != "t1" || ov.Connections != -1 {
		t.Errorf("overview server %q connections %d", ov.Server, ov.Connections)
	}

	var ts TopicStats
	getJSON(t, s.URL()+"/api/topics/orders", &ts)
	if ts.Published != 10 || ts.DeadLetter || len(ts.Partitions) != 2 || len(ts.Groups) != 1 {
		t.Fatalf("topic stats: %+v", ts)
	}
	if sum := ts.Partitions[0].LastSeq + ts.Partitions[1].LastSeq; sum != 10 {
		t.Errorf("partition last seqs sum to %d, want 10", sum)
	}
	// Group stats are published by the partition actors after each round, and a
	// reject settles its offset only once the dead-letter append is durable, so
	// the numbers catch up shortly after the dead letter shows: wait for them.
	var gs GroupStats
	waitFor(t, 5*time.Second, "group stats after ack and reject", func() bool {
		getJSON(t, s.URL()+"/api/topics/orders/groups/billing", &gs)
		return gs.Lag == 8 && gs.Settled == 2 && gs.Inflight == inflight && gs.Ready == 8-inflight
	})
	if gs.Acked != 1 || gs.Rejected != 1 || gs.Delivered != uint64(len(ds)) {
		t.Errorf("group counters: %+v; want acked 1, rejected 1, delivered %d", gs.GroupCounters, len(ds))
	}

	for _, path := range []string{"/api/topics/nope", "/api/topics/orders/groups/nope"} {
		if code, body := get(t, s.URL()+path); code != http.StatusNotFound || !strings.Contains(string(body), `"error"`) {
			t.Errorf("GET %s: %d %s", path, code, body)
		}
	}
}

// metricValue finds the sample of name with exactly the labels given.
func metricValue(t *testing.T, text, name, labels string) (float64, bool) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+labels) + ` (\S+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("%s%s: %v", name, labels, err)
	}
	return v, true
}

func TestMetrics(t *testing.T) {
	b := openBroker(t)
	conns := connList{{ID: 1, Remote: "127.0.0.1:5000", InBytes: 100, OutBytes: 7}, {ID: 2, InBytes: 1}}
	s := startAdmin(t, Options{Broker: staticBroker(b), Conns: conns, Version: "9.9"})
	tp, err := b.CreateTopic("jobs", broker.TopicConfig{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := tp.Group("workers", broker.GroupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, tp, 7)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := g.Poll(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}

	var text string
	waitFor(t, 5*time.Second, "metrics to show 7 published and the poll in flight", func() bool {
		_, body := get(t, s.URL()+"/metrics")
		text = string(body)
		v, ok := metricValue(t, text, "fibril_topic_published_total", `{topic="jobs"}`)
		f, ok2 := metricValue(t, text, "fibril_group_inflight_messages", `{group="workers",topic="jobs"}`)
		return ok && v == 7 && ok2 && f == float64(len(ds))
	})
	for _, tc := range []struct {
		name, labels string
		want         float64
	}{
		{"fibril_engine_up", "", 1},
		{"fibril_server_info", `{server="fibril",version="9.9"}`, 1},
		{"fibril_connections", "", 2},
		{"fibril_connection_in_bytes_total", "", 101},
		{"fibril_topic_messages", `{topic="jobs"}`, 7},
		{"fibril_partition_last_seq", `{partition="0",topic="jobs"}`, 7},
		{"fibril_partition_first_seq", `{partition="0",topic="jobs"}`, 1},
		{"fibril_partition_restored_events", `{partition="0",topic="jobs"}`, 0},
		{"fibril_group_lag_messages", `{group="workers",topic="jobs"}`, 7},
		{"fibril_group_ready_messages", `{group="workers",topic="jobs"}`, float64(7 - len(ds))},
		{"fibril_group_settled_total", `{group="workers",topic="jobs"}`, 0},
	} {
		got, ok := metricValue(t, text, tc.name, tc.labels)
		if !ok || got != tc.want {
			t.Errorf("%s%s = %v (found %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	for _, name := range []string{"go_goroutines", "process_open_fds"} {
		if _, ok := metricValue(t, text, name, ""); !ok {
			t.Errorf("%s missing from /metrics", name)
		}
	}

	// Settling moves the derived settled counter and the lag.
	for _, d := range ds {
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "settled counter to reach the acks", func() bool {
		_, body := get(t, s.URL()+"/metrics")
		v, _ := metricValue(t, string(body), "fibril_group_settled_total", `{group="workers",topic="jobs"}`)
		return v == float64(len(ds))
	})
}

type connList []ConnInfo

func (c connList) Connections() []ConnInfo { return append([]ConnInfo(nil), c...) }

// LookupConn resolves the listed (open) connections.
func (c connList) LookupConn(id uint64) (ConnRef, bool) {
	for _, ci := range c {
		if ci.ID == id {
			return ConnRef{ID: id, Name: ci.Name, Remote: ci.Remote, User: ci.User, Open: true}, true
		}
	}
	return ConnRef{}, false
}

func TestConnections(t *testing.T) {
	b := openBroker(t)
	without := startAdmin(t, Options{Broker: staticBroker(b)})
	if code, _ := get(t, without.URL()+"/api/connections"); code != http.StatusNotImplemented {
		t.Errorf("no ConnSource: status %d, want 501", code)
	}
	with := startAdmin(t, Options{Broker: staticBroker(b), Conns: connList{{ID: 42, Remote: "10.0.0.1:999", Name: "app"}}})
	var out struct{ Connections []ConnInfo }
	getJSON(t, with.URL()+"/api/connections", &out)
	if len(out.Connections) != 1 || out.Connections[0].ID != 42 || out.Connections[0].Name != "app" {
		t.Errorf("connections: %+v", out)
	}
}

func TestAuthorization(t *testing.T) {
	b := openBroker(t)
	s := startAdmin(t, Options{Broker: staticBroker(b), Authenticate: TokenAuth("s3cret")})
	basic := func(user, pass string) string {
		r, _ := http.NewRequest("GET", "/", nil)
		r.SetBasicAuth(user, pass)
		return r.Header.Get("Authorization")
	}
	for _, tc := range []struct {
		path, auth string
		want       int
	}{
		{"/healthz", "", 200},
		{"/readyz", "", 200},
		{"/metrics", "", 401},
		{"/api/topics", "", 401},
		{"/", "", 401},
		{"/api/topics", "Bearer wrong", 401},
		{"/api/topics", "Bearer s3cret", 200},
		{"/metrics", "Bearer s3cret", 200},
		{"/api/topics", basic("anyone", "s3cret"), 200},
		{"/", basic("anyone", "s3cret"), 200},
		{"/api/topics", basic("s3cret", "nope"), 401},
	} {
		var hdr []string
		if tc.auth != "" {
			hdr = []string{"Authorization", tc.auth}
		}
		if code, body := get(t, s.URL()+tc.path, hdr...); code != tc.want {
			t.Errorf("GET %s with %q: %d, want %d: %.80s", tc.path, tc.auth, code, tc.want, body)
		}
	}
}

func TestDashboardServed(t *testing.T) {
	b := openBroker(t)
	s := startAdmin(t, Options{Broker: staticBroker(b), ServerName: "demo<1>"})
	for _, tc := range []struct{ path, want string }{
		{"/", `<span class="server">demo&lt;1&gt;</span>`},
		{"/ui/dashboard.js", `fetch("/api/topics"`},
		{"/ui/dashboard.css", `table`},
		{"/ui/cluster.js", `fetch("/api/cluster"`},
	} {
		code, body := get(t, s.URL()+tc.path)
		if code != 200 || !strings.Contains(string(body), tc.want) {
			t.Errorf("GET %s: %d, want body containing %q", tc.path, code, tc.want)
		}
	}
	if code, _ := get(t, s.URL()+"/ui/missing.js"); code != 404 {
		t.Errorf("missing asset: %d", code)
	}

}

func TestAuthHelpers(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	ann := access.NewUser("ann", access.RoleMonitor, 2, access.Permissions{})
	users := BasicAuth(bcryptChecker{"ann": {hash: hash, id: ann}})
	both := AnyAuth(nil, TokenAuth("tok"), users)
	req := func(set func(r *http.Request)) *http.Request {
		r, _ := http.NewRequest("GET", "/", nil)
		set(r)
		return r
	}
	for _, tc := range []struct {
		name        string
		r           *http.Request
		users, both error
	}{
		{"none", req(func(*http.Request) {}), ErrNoCredentials, ErrNoCredentials},
		{"user ok", req(func(r *http.Request) { r.SetBasicAuth("ann", "pw") }), nil, nil},
		{"user bad pass", req(func(r *http.Request) { r.SetBasicAuth("ann", "px") }), ErrBadCredentials, ErrBadCredentials},
		{"unknown user", req(func(r *http.Request) { r.SetBasicAuth("bob", "pw") }), ErrBadCredentials, ErrBadCredentials},
		{"token as basic", req(func(r *http.Request) { r.SetBasicAuth("x", "tok") }), ErrBadCredentials, nil},
		{"bearer", req(func(r *http.Request) { r.Header.Set("Authorization", "Bearer tok") }), ErrNoCredentials, nil},
		{"busy", req(func(r *http.Request) { r.SetBasicAuth("busy", "x") }), ErrBusy, ErrBusy},
	} {
		id, err := users(tc.r)
		if !errors.Is(err, tc.users) || (err == nil && id != ann) {
			t.Errorf("%s: BasicAuth %v (%v), want %v", tc.name, err, id, tc.users)
		}
		if _, err := both(tc.r); !errors.Is(err, tc.both) {
			t.Errorf("%s: AnyAuth %v, want %v", tc.name, err, tc.both)
		}
	}
	// Auth off on the server (no token, no users) means off here too, and an
	// empty token never lets an empty password in.
	if AnyAuth(TokenAuth(""), BasicAuth(nil)) != nil {
		t.Error("AnyAuth of nothing must be nil (no authorization)")
	}
	if TokenAuth("") != nil {
		t.Error("TokenAuth(\"\") must be nil")
	}
}
