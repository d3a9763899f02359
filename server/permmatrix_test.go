package server

// The permission matrix (issue 23): users × verbs and admin endpoints ×
// subjects and topics against a real server, each answer compared with the
// reference model (permmodel_test.go). Covered: PUB, plain SUB, POLL,
// durable SUB, TOPIC CREATE (name and filters), TOPIC DELETE (also of a
// dead-letter topic), TOPIC INFO, TOPIC LIST membership, GROUP CREATE with
// every kind of dead_letter target, GROUP INFO/LIST, settling another
// identity's or its own delivery by every verb and by publishing to the
// handle, and every admin HTTP endpoint. It must agree 100 %.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/memstore"
	"github.com/fibrilmq/fibril/server/access"
)

// matrixSpec is one matrix: who, on what. users[0] is "root" (every
// right, role admin), which sets the stage. topics exist during the whole
// run, each with a group mg; the run adds "$DLQ.<topics[0]>.mg", the
// dead-letter topic of topics[0]/mg, as one more. creates are TOPIC
// CREATE requests (what they create goes again); deletes are made by root
// for each TOPIC DELETE attempt ("$DLQ.<topics[0]>.d" as the dead-letter
// topic of the group topics[0]/d); deadLetters are GROUP CREATE targets
// ("default" stands for the group's own "$DLQ.<topic>.<group>").
type matrixSpec struct {
	users             []refUser
	topics            []refTopic
	subjects, filters []string
	creates, deletes  []refTopic
	deadLetters       []string
}

// fixedMatrix is the hand-picked matrix: the shapes of issue 23's
// bypasses and their neighbours.
func fixedMatrix() matrixSpec {
	return matrixSpec{
		users: []refUser{
			{name: "root", role: "admin"},
			{name: "orders",
				pub: refRule{allow: []string{"orders", "orders.>"}, deny: []string{"orders.secret"}},
				con: refRule{allow: []string{"orders", "orders.>", "$DLQ.orders.>"}}},
			{name: "eu", pub: refRule{allow: []string{"orders.eu.>"}}, con: refRule{allow: []string{"orders.eu.>"}}},
			{name: "billing",
				pub: refRule{allow: []string{"billing", "billing.>"}},
				con: refRule{allow: []string{"billing", "billing.>", "_INBOX.>"}}},
			{name: "reader", role: "monitor",
				pub: refRule{deny: []string{">"}}, con: refRule{allow: []string{">"}, deny: []string{"billing.>"}}},
			{name: "pubonly",
				pub: refRule{allow: []string{"orders.>", "billing", "shared.>"}}, con: refRule{deny: []string{">"}}},
			{name: "adm", role: "admin",
				pub: refRule{allow: []string{"shared", "shared.>"}}, con: refRule{allow: []string{"shared", "shared.>"}}},
			// Together its allow filters take in shared.>, one by one they do
			// not: a filter needs one allow filter that covers it.
			{name: "split", pub: refRule{allow: []string{"shared.*", "shared.*.>"}}, con: refRule{allow: []string{"shared.*", "shared.*.>"}}},
		},
		topics: []refTopic{
			{name: "orders"},
			{name: "orders.eu", filters: []string{"orders.eu.>"}},
			{name: "billing", filters: []string{"billing", "billing.y.>"}},
			{name: "mixed", filters: []string{"orders.x", "billing.x"}},
			{name: "shared.q"},
		},
		subjects: []string{"orders", "orders.eu.x", "orders.secret", "orders.x", "billing",
			"billing.y.z", "shared.q", "x", "_INBOX.a", "$DLQ.orders.mg"},
		filters: []string{"orders", "orders.>", "orders.*", ">", "billing.*", "_INBOX.>",
			"shared.q", "$DLQ.>", "orders.eu.*", "*.x", "shared.>", "shared.*.>"},
		creates: []refTopic{
			{name: "orders.new"}, {name: "orders.dl", filters: []string{"orders.dl.>"}},
			{name: "billing.new", filters: []string{"orders.new"}}, {name: "x", filters: []string{">"}},
			{name: "x"}, {name: "$x"}, {name: "x.new", filters: []string{"$DLQ.>"}},
			{name: "orders.w", filters: []string{"orders.*"}}, {name: "shared.new", filters: []string{"shared.new"}},
			{name: "orders.eu.new", filters: []string{"orders.eu.new", "billing.new"}},
		},
		deletes: []refTopic{
			{name: "orders.d"}, {name: "mixed.d", filters: []string{"orders.d.x", "billing.d"}},
			{name: "billing.d", filters: []string{"billing.d"}}, {name: "shared.d"}, {name: "$DLQ.orders.d"},
		},
		deadLetters: []string{"", "-", "default", "$DLQ.billing.mg", "$DLQ.orders.mg", "$F.1.1.0.1.1", "orders",
			"billing", "mixed", "orders.dl", "x.dl", "shared.q", "orders.secret"},
	}
}

// mconn is one raw Fibril-mode connection of the matrix; errors fail the
// test (they are not answers).
type mconn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func matrixLogin(t *testing.T, s *Server, user string) *mconn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", s.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &mconn{t: t, nc: nc, r: bufio.NewReaderSize(nc, 1<<16)}
	if l := c.line(); !strings.HasPrefix(l, "INFO ") {
		t.Fatalf("%s: %q", user, l)
	}
	if a := c.do(`CONNECT {"fibril":1,"user":"` + user + `","pass":"pw"}`); a != "+OK" {
		t.Fatalf("login %s: %q", user, a)
	}
	return c
}

func (c *mconn) line() string {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	l, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read: %v (after %q)", err, l)
	}
	return strings.TrimRight(l, "\r\n")
}

// do sends one command (a PUB's body after "\r\n") and returns its answer
// line, reading past deliveries (whose handles it collects in got).
func (c *mconn) do(cmd string, got ...*[]string) string {
	c.t.Helper()
	_ = c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c.nc, cmd+"\r\n"); err != nil {
		c.t.Fatalf("send %q: %v", cmd, err)
	}
	for {
		l := c.line()
		if !strings.HasPrefix(l, "MSG ") && !strings.HasPrefix(l, "HMSG ") {
			return l
		}
		f := strings.Fields(l)
		n, err := strconv.Atoi(f[len(f)-1])
		if err != nil {
			c.t.Fatalf("frame %q", l)
		}
		if _, err := io.ReadFull(c.r, make([]byte, n+2)); err != nil {
			c.t.Fatalf("body: %v", err)
		}
		if len(got) > 0 && f[2] == "0" {
			*got[0] = append(*got[0], f[3])
		}
	}
}

// refused classifies an answer: a permission refusal or not.
func refused(answer string) bool {
	return strings.HasPrefix(answer, "-ERR 'permission_denied") || strings.HasPrefix(answer, "-ERR 'reserved_subject")
}

// matrix collects the cases and their verdicts.
type matrix struct {
	t      *testing.T
	cases  int
	wrong  []string
	byVerb map[string]int
}

func (mx *matrix) check(verb, user, what string, want bool, answer string, denied bool) {
	mx.cases++
	mx.byVerb[verb]++
	if denied == want {
		mx.wrong = append(mx.wrong, fmt.Sprintf("%s %s as %s: model says allowed=%v, server answered %q", verb, what, user, want, answer))
	}
}

func (mx *matrix) wire(verb, user, what string, want bool, answer string) {
	mx.check(verb, user, what, want, answer, refused(answer))
}

func startMatrixServer(t *testing.T, users []refUser) *Server {
	pw := hash(t, "pw")
	ms := memstore.New() // logs in memory: the matrix is about answers, not disks
	return startServer(t, func(o *Options) {
		o.NoBroker = false
		o.Engine.OpenStore = ms.Open
		o.DataDir = fastDir(t)
		o.HTTPListen = "127.0.0.1:0"
		o.AutoCreate = nil // a PUB case must not add topics (the default)
		for _, u := range users {
			o.Users = append(o.Users, User{Name: u.name, PasswordHash: pw, Role: access.Role(u.role),
				Permissions: Permissions{
					Publish: SubjectPermission{Allow: u.pub.allow, Deny: u.pub.deny},
					Consume: SubjectPermission{Allow: u.con.allow, Deny: u.con.deny},
				}})
		}
	})
}

// fastDir is a temporary directory on tmpfs when the machine has one:
// the matrix creates and deletes hundreds of topics and groups, each an
// fsynced catalog write, and it is about answers, not disks.
func fastDir(t *testing.T) string {
	if d, err := os.MkdirTemp("/dev/shm", "fibril-matrix-"); err == nil {
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return t.TempDir()
}

func topicCreateCmd(t refTopic) string {
	if len(t.filters) == 0 {
		return "TOPIC CREATE " + t.name
	}
	js, _ := json.Marshal(map[string][]string{"subjects": t.filters})
	return "TOPIC CREATE " + t.name + " " + string(js)
}

// literal turns a filter into a subject it matches.
func literal(f string) string {
	return strings.NewReplacer("*", "a", ">", "a").Replace(f)
}

func TestPermissionMatrixAgreesWithModel(t *testing.T) {
	runMatrix(t, fixedMatrix())
}

// runMatrix runs spec against a fresh server and fails on any case where
// the server and the model disagree.
func runMatrix(t *testing.T, spec matrixSpec) {
	model := newRefModel()
	s := startMatrixServer(t, spec.users)
	mx := &matrix{t: t, byVerb: map[string]int{}}
	root := matrixLogin(t, s, spec.users[0].name)
	must := func(cmd string) string {
		t.Helper()
		a := root.do(cmd)
		if !strings.HasPrefix(a, "+OK") {
			t.Fatalf("root %q: %q", cmd, a)
		}
		return a
	}
	first := spec.topics[0].name
	dlq := refTopic{name: "$DLQ." + first + ".mg"}
	for i, tp := range spec.topics {
		must(topicCreateCmd(tp))
		dl := ` {"dead_letter":"-"}`
		if i == 0 {
			dl = ""
		}
		must("GROUP CREATE " + tp.name + " mg" + dl)
	}
	must("GROUP CREATE " + dlq.name + " mg")
	must("TOPIC CREATE zz.purge")
	topics := append(append([]refTopic(nil), spec.topics...), dlq)
	conns := map[string]*mconn{}
	for _, u := range spec.users {
		conns[u.name] = matrixLogin(t, s, u.name)
	}

	// Deliveries to settle: for each topic, one message leased by each user
	// that may consume it. The dead-letter topic is filled by rejects.
	holders := map[string]map[string]string{} // topic -> holder -> handle
	for _, tp := range topics {
		holders[tp.name] = map[string]string{}
		for _, u := range spec.users {
			if !model.consume(u, tp) {
				continue
			}
			if tp.name == dlq.name {
				var mh []string
				must("PUB " + literal(spec.topics[0].all()[len(spec.topics[0].all())-1]) + " 2\r\ndl")
				if a := root.do("POLL "+first+" mg 1 5000", &mh); a != "+OK 1" || len(mh) != 1 {
					t.Fatalf("poll %s/mg: %q", first, a)
				}
				must("REJECT " + mh[0])
			} else {
				must("PUB " + literal(tp.all()[len(tp.all())-1]) + " 1\r\nm")
			}
			var hs []string
			if a := conns[u.name].do("POLL "+tp.name+" mg 1 5000", &hs); a != "+OK 1" || len(hs) != 1 {
				t.Fatalf("%s polls %s: %q %v", u.name, tp.name, a, hs)
			}
			holders[tp.name][u.name] = hs[0]
		}
	}

	for _, u := range spec.users {
		c := conns[u.name]
		for _, subj := range spec.subjects {
			mx.wire("PUB", u.name, subj, model.pub(u, subj), c.do("PUB "+subj+" 1\r\np"))
		}
		sc := matrixLogin(t, s, u.name)
		for i, f := range spec.filters {
			sid := strconv.Itoa(i + 1)
			mx.wire("SUB", u.name, f, model.sub(u, f), sc.do("SUB "+f+" "+sid))
			sc.do("UNSUB " + sid)
		}
		for i, tp := range topics {
			sid := "d" + strconv.Itoa(i)
			mx.wire("SUB durable", u.name, tp.name, model.consume(u, tp), sc.do("SUB "+tp.name+" q "+sid+" 1"))
			sc.do("UNSUB " + sid)
			mx.wire("POLL", u.name, tp.name, model.consume(u, tp), c.do("POLL "+tp.name+" pp 1"))
			mx.wire("TOPIC INFO", u.name, tp.name, model.see(u, tp), c.do("TOPIC INFO "+tp.name))
			mx.wire("GROUP INFO", u.name, tp.name, model.see(u, tp), c.do("GROUP INFO "+tp.name+" mg"))
			mx.wire("GROUP LIST", u.name, tp.name, model.see(u, tp), c.do("GROUP LIST "+tp.name))
		}
		list := c.do("TOPIC LIST")
		var tl struct{ Topics []string }
		if err := json.Unmarshal([]byte(strings.TrimPrefix(list, "+OK ")), &tl); err != nil {
			t.Fatalf("TOPIC LIST: %q", list)
		}
		for _, tp := range topics {
			mx.check("TOPIC LIST", u.name, tp.name, model.see(u, tp), list, !slices.Contains(tl.Topics, tp.name))
		}
		for _, tp := range spec.creates {
			a := c.do(topicCreateCmd(tp))
			mx.wire("TOPIC CREATE", u.name, topicCreateCmd(tp), model.create(u, tp), a)
			if strings.HasPrefix(a, "+OK") {
				must("TOPIC DELETE " + tp.name)
			}
		}
		for _, tp := range spec.deletes {
			viaGroup := tp.name == "$DLQ."+first+".d"
			if viaGroup {
				must("GROUP CREATE " + first + " d")
			} else {
				must(topicCreateCmd(tp))
			}
			a := c.do("TOPIC DELETE " + tp.name)
			mx.wire("TOPIC DELETE", u.name, tp.name, model.remove(u, tp), a)
			if viaGroup {
				must("GROUP DELETE " + first + " d")
			}
			if !strings.HasPrefix(a, "+OK") {
				must("TOPIC DELETE " + tp.name)
			}
		}
	}

	// GROUP CREATE × dead_letter targets; what a success created goes again.
	n := 0
	for _, u := range spec.users {
		c := conns[u.name]
		for _, tp := range topics {
			for _, dl := range spec.deadLetters {
				n++
				g := "g" + strconv.Itoa(n)
				target := dl
				if dl == "default" {
					target = "$DLQ." + tp.name + "." + g
				}
				cmd := "GROUP CREATE " + tp.name + " " + g
				if dl != "" {
					cmd += ` {"dead_letter":"` + target + `"}`
				}
				var existing *refTopic
				for i := range topics {
					if topics[i].name == target {
						existing = &topics[i]
					}
				}
				a := c.do(cmd)
				mx.wire("GROUP CREATE", u.name, cmd, model.groupCreate(u, tp, g, target, existing), a)
				if !strings.HasPrefix(a, "+OK") {
					continue
				}
				must("GROUP DELETE " + tp.name + " " + g)
				for _, made := range []string{"$DLQ." + tp.name + "." + g, target} {
					if made != "" && made != "-" && existing == nil {
						if a := root.do("TOPIC DELETE " + made); !strings.HasPrefix(a, "+OK") && !strings.HasPrefix(a, "-ERR 'unknown_topic") {
							t.Fatalf("cleanup %s: %q", made, a)
						}
					}
				}
			}
		}
	}

	// Settling: refusals first (they change nothing), then what the model
	// allows with the verbs that keep the lease (EXTEND, +WPI).
	denyOps := []string{"ACK %s", "NACK %s", "REJECT %s", "EXTEND %s", "PUB %s 4\r\n+ACK", "PUB %s 4\r\n-NAK", "PUB %s 5\r\n+TERM", "PUB %s 4\r\n+WPI"}
	keepOps := []string{"EXTEND %s", "PUB %s 4\r\n+WPI"}
	for _, phase := range []bool{false, true} {
		for _, tp := range topics {
			for _, holder := range spec.users {
				h, ok := holders[tp.name][holder.name]
				if !ok {
					continue
				}
				for _, u := range spec.users {
					want := model.settle(u, holder, tp)
					if want != phase {
						continue
					}
					ops := denyOps
					if want {
						ops = keepOps
					}
					for _, op := range ops {
						cmd := fmt.Sprintf(op, h)
						f := strings.Fields(cmd)
						mx.wire("SETTLE", u.name, f[0]+" "+f[len(f)-1]+" of "+holder.name+"'s delivery on "+tp.name, want, conns[u.name].do(cmd))
					}
				}
			}
		}
	}

	// The admin listener, with each user's password.
	base := "http://" + s.HTTPAddr().String()
	for _, u := range spec.users {
		hit := func(what, method, path string, tp *refTopic) int {
			code, body := httpAs(t, method, base+path, u.name)
			mx.check("HTTP "+method, u.name, path, model.httpAllowed(u, what, tp), strconv.Itoa(code)+" "+body, code == http.StatusForbidden)
			return code
		}
		hit("metrics", "GET", "/metrics", nil)
		hit("conns", "GET", "/api/connections", nil)
		hit("operate", "POST", "/api/topics/zz.purge/purge", nil)
		hit("operate", "POST", "/api/topics/"+dlq.name+"/requeue", nil)
		for i := range topics {
			tp := &topics[i]
			p := "/api/topics/" + tp.name
			hit("view", "GET", p, tp)
			hit("view", "GET", p+"/groups/mg", tp)
			hit("read", "GET", p+"/partitions/0/messages", tp)
			hit("read", "GET", p+"/partitions/0/messages/1/history", tp)
			hit("read", "GET", p+"/partitions/0/events", tp)
			if hit("operate", "POST", p+"/groups/mg/pause", tp) == http.StatusOK {
				hit("operate", "POST", p+"/groups/mg/resume", tp)
			}
		}
		_, body := httpAs(t, "GET", base+"/api/topics", u.name)
		var ov struct{ Topics []struct{ Name string } }
		if err := json.Unmarshal([]byte(body), &ov); err != nil {
			t.Fatalf("/api/topics as %s: %v", u.name, err)
		}
		for i := range topics {
			listed := slices.ContainsFunc(ov.Topics, func(x struct{ Name string }) bool { return x.Name == topics[i].name })
			mx.check("HTTP topic list", u.name, topics[i].name, model.httpAllowed(u, "view", &topics[i]), body, !listed)
		}
	}

	t.Logf("%d cases: %v", mx.cases, mx.byVerb)
	for _, w := range mx.wrong {
		t.Error(w)
	}
	if len(mx.wrong) > 0 {
		t.Fatalf("%d of %d cases disagree with the model", len(mx.wrong), mx.cases)
	}
}
