package server

// Regression tests for the bypasses of issue 23 ("Authorization that can
// be walked around"), each against a real server on 127.0.0.1:0 with users
// configured. The rules are SPEC.md 6.1.

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fibrilmq/fibril/server/access"
)

// permUsers are the accounts of these tests (password "pw" each):
// orders owns orders and orders.>, thief owns thief.>, peer may consume
// orders (a second consumer of the same queue), root has every right.
func permUsers(t *testing.T) []User {
	pw := hash(t, "pw")
	both := func(allow ...string) Permissions {
		return Permissions{Publish: SubjectPermission{Allow: allow}, Consume: SubjectPermission{Allow: allow}}
	}
	orders := both("orders", "orders.>", "$DLQ.orders.>")
	orders.Publish.Deny = []string{"orders.secret"}
	return []User{
		{Name: "orders", PasswordHash: pw, Permissions: orders},
		{Name: "thief", PasswordHash: pw, Permissions: both("thief", "thief.>")},
		{Name: "peer", PasswordHash: pw, Permissions: Permissions{Consume: SubjectPermission{Allow: []string{"orders", "orders.>", "_INBOX.>"}}, Publish: SubjectPermission{Allow: []string{"peer.>"}}}},
		{Name: "root", PasswordHash: pw},
	}
}

// loginAs dials s and logs user in, in Fibril mode.
func loginAs(t *testing.T, s *Server, user string) *wireConn {
	t.Helper()
	w := dialInfo(t, s)
	w.send(`CONNECT {"fibril":1,"user":"` + user + `","pass":"pw"}` + "\r\n")
	w.expect(`^\+OK$`)
	return w
}

func startPermServer(t *testing.T) *Server {
	return startDurable(t, func(o *Options) { o.Users = permUsers(t) })
}

const deniedRe = `^-ERR 'permission_denied `

// TOPIC CREATE with filters capturing another user's subjects was
// accepted: the thief then read everything published there, and the owner
// got unknown_topic for its own data.
func TestCreateTopicCannotCaptureAnotherUsersSubjects(t *testing.T) {
	s := startPermServer(t)
	thief := loginAs(t, s, "thief")
	for _, cmd := range []string{
		`TOPIC CREATE thief.all {"subjects":["orders.>"]}`,
		`TOPIC CREATE thief.x {"subjects":["thief.x","orders"]}`,
		`TOPIC CREATE thief.y {"subjects":[">"]}`,
		`TOPIC CREATE orders.stolen`,
	} {
		thief.send(cmd + "\r\n")
		thief.expect(deniedRe)
	}
	owner := loginAs(t, s, "orders")
	owner.send("TOPIC CREATE billing {\"subjects\":[\"orders.eu.>\"]}\r\n")
	owner.expect(`^-ERR 'permission_denied .*billing`) // the name is a subject too: no squatting
	owner.send("TOPIC CREATE orders.eu {\"subjects\":[\"orders.eu.>\"]}\r\n")
	owner.expect(`^\+OK \{"name":"orders.eu"`)
	owner.send("TOPIC CREATE orders.wide {\"subjects\":[\"orders.*\"]}\r\n")
	owner.expect(deniedRe) // orders.* holds orders.secret, on its publish deny list
	owner.send("PUB orders.eu.1 2\r\nhi\r\nPOLL orders.eu g 1 5000\r\n")
	owner.expect(`^\+OK 0:1$`)
	owner.expectDelivery(`^MSG orders.eu.1 0 `, "hi")
	owner.expect(`^\+OK 1$`)
	thief.send("POLL orders.eu g 1\r\n")
	thief.expect(deniedRe)
}

// TOPIC CREATE/DELETE need rights over the topic as found: deleting a topic
// whose filters reach beyond the user's rights is refused.
func TestTopicDeleteNeedsRightsOverEveryFilter(t *testing.T) {
	s := startPermServer(t)
	root := loginAs(t, s, "root")
	root.send("TOPIC CREATE orders.mixed {\"subjects\":[\"orders.mixed\",\"billing.>\"]}\r\n")
	root.expect(`^\+OK `)
	owner := loginAs(t, s, "orders")
	owner.send("TOPIC DELETE orders.mixed\r\nTOPIC INFO orders.mixed\r\nPOLL orders.mixed g 1\r\nTOPIC DELETE billing\r\nTOPIC DELETE orders.none\r\n")
	owner.expect(deniedRe)
	owner.expect(deniedRe)
	owner.expect(deniedRe)
	owner.expect(deniedRe)                // not its name: refused before any lookup
	owner.expect(`^-ERR 'unknown_topic `) // its name: it may know it does not exist
}

// GROUP CREATE accepted any dead_letter target: a topic the user may not
// publish to, subjects on its deny list, and the reserved $ space (also a
// topic whose filters capture $DLQ.>); REJECT then wrote into them.
func TestDeadLetterTargetNeedsPublishRights(t *testing.T) {
	s := startPermServer(t)
	root := loginAs(t, s, "root")
	root.send("TOPIC CREATE billing\r\nTOPIC CREATE grab {\"subjects\":[\"$DLQ.>\"]}\r\n")
	root.expect(`^\+OK `)
	root.expect(`^-ERR 'reserved_subject `)
	owner := loginAs(t, s, "orders")
	owner.send("TOPIC CREATE orders\r\n")
	owner.expect(`^\+OK `)
	for _, tc := range []struct{ target, want string }{
		{"billing", deniedRe},
		{"orders.secret", deniedRe},
		{"nowhere", deniedRe},
		{"$F.1.1.0.1.1", `^-ERR 'reserved_subject `},
		{"$DLQ.billing.g", `^-ERR 'reserved_subject `},
		{"$DLQ.orders.other", `^-ERR 'reserved_subject `},
	} {
		owner.send(`GROUP CREATE orders g {"dead_letter":"` + tc.target + `"}` + "\r\n")
		owner.expect(tc.want)
	}
	owner.send("GROUP LIST orders\r\n")
	owner.expect(`^\+OK \{"topic":"orders","groups":\[\]\}$`)
	// Allowed: the default, none, and a topic of its own; REJECT then lands there.
	owner.send(`GROUP CREATE orders d {"dead_letter":"$DLQ.orders.d"}` + "\r\n")
	owner.expect(`^\+OK `)
	owner.send(`GROUP CREATE orders n {"dead_letter":"-"}` + "\r\n")
	owner.expect(`^\+OK `)
	owner.send(`GROUP CREATE orders g {"dead_letter":"orders.dead"}` + "\r\n")
	owner.expect(`^\+OK .*"dead_letter":"orders.dead"`)
	owner.send("PUB orders 2\r\nhi\r\nPOLL orders g 1 5000\r\n")
	owner.expect(`^\+OK 0:1$`)
	h := owner.expectDelivery(`^MSG orders 0 `, "hi")
	owner.expect(`^\+OK 1$`)
	owner.send("REJECT " + h + "\r\nPOLL orders.dead ops 1 5000\r\n")
	owner.expect(`^\+OK$`)
	owner.expect(`^HMSG orders.dead 0 `)
}

// Any connection could settle any handle, by verb or by publishing to it,
// including guessed handles of another user's leases.
func TestSettleNeedsTheLeaseHolder(t *testing.T) {
	s := startPermServer(t)
	owner := loginAs(t, s, "orders")
	owner.send("TOPIC CREATE orders\r\nPUB orders 1\r\na\r\nPUB orders 1\r\nb\r\nPOLL orders g 2 5000\r\n")
	owner.expect(`^\+OK \{`)
	owner.expect(`^\+OK 0:1$`)
	owner.expect(`^\+OK 0:2$`)
	h1 := owner.expectDelivery(`^MSG orders 0 `, "a")
	h2 := owner.expectDelivery(`^MSG orders 0 `, "b")
	owner.expect(`^\+OK 2$`)
	guessed := regexp.MustCompile(`\.\d+$`).ReplaceAllString(h1, ".1") // what an attacker would type
	for _, who := range []string{"peer", "thief"} {
		w := loginAs(t, s, who)
		for _, cmd := range []string{
			"ACK " + guessed, "NACK " + h1, "REJECT " + h1, "EXTEND " + h1, "ACK " + h2 + " " + h1,
			"PUB " + h1 + " 4\r\n+ACK", "PUB " + h1 + " 5\r\n+TERM", "PUB " + h1 + " 4\r\n-NAK",
		} {
			w.send(cmd + "\r\n")
			w.expect(deniedRe)
		}
	}
	// A stock NATS client of another user, settling by publish: refused, and
	// told so on the reply subject (JetStream's double ack).
	nc := natsConnect(t, s, nats.UserInfo("peer", "pw"))
	if m, err := nc.Request(h1, []byte("+ACK"), 5*time.Second); err != nil || !strings.HasPrefix(string(m.Data), "permission_denied") {
		t.Fatalf("settle by a stock client of another user: %v %v", m, err)
	}
	// The holder settles, also from a new connection (an SDK's reconnect).
	again := loginAs(t, s, "orders")
	again.send("ACK " + h1 + "\r\nPUB " + h2 + " 4\r\n+ACK\r\n")
	again.expect(`^\+OK$`)
	again.expect(`^\+OK -$`)
	owner.send("POLL orders g 2\r\n")
	owner.expect(`^\+OK 0$`)
}

// TOPIC LIST showed every topic to every user.
func TestTopicListShowsOnlyVisibleTopics(t *testing.T) {
	s := startPermServer(t)
	root := loginAs(t, s, "root")
	root.send("TOPIC CREATE orders\r\nTOPIC CREATE billing\r\nTOPIC CREATE thief.box\r\nGROUP CREATE orders g\r\n")
	for range 4 {
		root.expect(`^\+OK `)
	}
	for _, tc := range []struct{ user, want string }{
		{"orders", `{"topics":["$DLQ.orders.g","orders"]}`},
		{"thief", `{"topics":["thief.box"]}`},
		{"peer", `{"topics":["orders"]}`},
		{"root", `{"topics":["$DLQ.orders.g","billing","orders","thief.box"]}`},
	} {
		w := loginAs(t, s, tc.user)
		w.send("TOPIC LIST\r\n")
		if got := w.expect(`^\+OK `); got != "+OK "+tc.want {
			t.Errorf("%s: TOPIC LIST = %q, want %q", tc.user, got, "+OK "+tc.want)
		}
		w.send("TOPIC INFO billing\r\nGROUP INFO billing g\r\nGROUP LIST billing\r\n")
		want := deniedRe
		if tc.user == "root" {
			want = `^\+OK |^-ERR 'unknown_group `
		}
		for range 3 {
			if l := w.expect(`.`); !regexp.MustCompile(want).MatchString(l) && !strings.HasPrefix(l, "+OK {\"topic\":\"billing\"") {
				t.Errorf("%s: %q", tc.user, l)
			}
		}
	}
}

// httpAs sends method url as user (basic auth, password "pw"); a POST
// carries a JSON content type and an empty object.
func httpAs(t *testing.T, method, url, user string) (int, string) {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	req.SetBasicAuth(user, "pw")
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// The admin HTTP listener gave any logged-in user everything: another
// user's payloads, the connection list with users and addresses, and
// pause/resume and purge of any topic.
func TestAdminHTTPDoesNotGiveEveryUserEverything(t *testing.T) {
	s := startServer(t, func(o *Options) {
		durableFiles(o)
		o.HTTPListen = "127.0.0.1:0"
		o.Users = permUsers(t)
		pw := hash(t, "pw")
		o.Users = append(o.Users,
			User{Name: "mon", PasswordHash: pw, Role: access.RoleMonitor, Permissions: Permissions{Consume: SubjectPermission{Allow: []string{"thief.>"}}}},
			User{Name: "adm", PasswordHash: pw, Role: access.RoleAdmin})
	})
	owner := loginAs(t, s, "orders")
	owner.send("TOPIC CREATE orders\r\nPUB orders 6\r\nsecret\r\nPOLL orders g 1 5000\r\n")
	owner.expect(`^\+OK \{`)
	owner.expect(`^\+OK 0:1$`)
	owner.expectDelivery(`^MSG orders 0 `, "secret")
	owner.expect(`^\+OK 1$`)
	base := "http://" + s.HTTPAddr().String()
	msgs := base + "/api/topics/orders/partitions/0/messages"
	for _, tc := range []struct {
		method, path, user string
		want               int
	}{
		{"GET", msgs, "thief", 403},
		{"GET", msgs, "mon", 403}, // read-only sees counters, never payloads it may not consume
		{"GET", msgs, "orders", 200},
		{"GET", msgs, "adm", 200},
		{"GET", base + "/api/topics/orders/partitions/0/messages/1/history", "thief", 403},
		{"GET", base + "/api/topics/orders/partitions/0/events", "thief", 403},
		{"GET", base + "/api/topics/nothing/partitions/0/messages", "thief", 403}, // no existence leak
		{"GET", base + "/api/topics/orders.none/partitions/0/messages", "orders", 404},
		{"GET", base + "/api/topics/orders", "thief", 403},
		{"GET", base + "/api/topics/orders", "mon", 200},
		{"GET", base + "/api/topics/orders/groups/g", "thief", 403},
		{"GET", base + "/api/connections", "thief", 403},
		{"GET", base + "/api/connections", "orders", 403},
		{"GET", base + "/api/connections", "mon", 403},
		{"GET", base + "/api/connections", "adm", 200},
		{"GET", base + "/metrics", "orders", 403},
		{"GET", base + "/metrics", "mon", 200},
		{"POST", base + "/api/topics/orders/groups/g/pause", "thief", 403},
		{"POST", base + "/api/topics/orders/groups/g/pause", "orders", 403},
		{"POST", base + "/api/topics/orders/groups/g/pause", "mon", 403},
		{"POST", base + "/api/topics/orders/groups/g/resume", "thief", 403},
		{"POST", base + "/api/topics/orders/purge", "thief", 403},
		{"POST", base + "/api/topics/orders/purge", "orders", 403},
		{"POST", base + "/api/topics/$DLQ.orders.g/requeue", "orders", 403},
		{"POST", base + "/api/topics/orders/groups/g/pause", "adm", 200},
		{"POST", base + "/api/topics/orders/groups/g/resume", "adm", 200},
		{"GET", base + "/", "thief", 200},
	} {
		code, body := httpAs(t, tc.method, tc.path, tc.user)
		if code != tc.want {
			t.Errorf("%s %s as %s: %d, want %d: %.100s", tc.method, tc.path, tc.user, code, tc.want, body)
		}
		if code == 403 && !strings.HasPrefix(body, `{"error":`) {
			t.Errorf("%s %s as %s: 403 without a JSON error: %q", tc.method, tc.path, tc.user, body)
		}
	}
	if _, body := httpAs(t, "GET", base+"/api/topics", "thief"); strings.Contains(body, `"orders"`) {
		t.Errorf("thief's topic list shows orders: %.200s", body)
	}
	if _, body := httpAs(t, "GET", base+"/api/topics", "mon"); !strings.Contains(body, `"name":"orders"`) {
		t.Errorf("monitor's topic list lacks orders: %.200s", body)
	}
	// Events name the connection (user, address) for admins only.
	events := base + "/api/topics/orders/partitions/0/events"
	if _, body := httpAs(t, "GET", events, "orders"); strings.Contains(body, `"conn":`) || !strings.Contains(body, `"owner_label":"conn `) {
		t.Errorf("events for a user show connections: %.300s", body)
	}
	if _, body := httpAs(t, "GET", events, "adm"); !strings.Contains(body, `"user":"orders"`) {
		t.Errorf("events for an admin lack the connection: %.300s", body)
	}
}
