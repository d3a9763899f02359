package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/access"
	"github.com/fibrilmq/fibril/server/admin"
	"github.com/fibrilmq/fibril/server/cluster"
)

// series returns the samples of metric name in a /metrics text, keyed by
// their labels as written, sorted by name
// ("follower=\"n2\",group=\"\",partition=\"0\",topic=\"jobs\"").
func series(text, name string) map[string]float64 {
	out := map[string]float64{}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(?:\{([^}]*)\})? (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err == nil {
			out[m[1]] = v
		}
	}
	return out
}

// httpGetAs fetches url with basic auth as user (password "pw"), or with
// no credentials when user is "".
func httpGetAs(t *testing.T, url, user string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, "pw")
	}
	c := &http.Client{Timeout: 10 * time.Second}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: read: %v", url, err)
	}
	return res.StatusCode, body
}

// clusterAPI is GET /api/cluster's answer as a client reads it.
type clusterAPI struct {
	Node  string `json:"node"`
	Nodes []struct {
		Name, Client string
		LeaderOfMeta bool `json:"leader_of_meta"`
	} `json:"nodes"`
	Partitions []struct {
		Topic     string `json:"topic"`
		Partition int    `json:"partition"`
		Leader    string `json:"leader"`
		Followers []struct {
			Name       string
			Match, Lag uint64
		} `json:"followers"`
		Term, Commit uint64
	} `json:"partitions"`
}

// startObservedCluster is startCluster with the admin listener on and two
// more users: "mon" (role monitor) and "admin" (role admin).
func startObservedCluster(t *testing.T) []*Server {
	return startCluster(t, true, func(o *Options) {
		o.HTTPListen = "127.0.0.1:0"
		pw := hash(t, "pw")
		o.Users = append(o.Users, User{Name: "mon", PasswordHash: pw, Role: access.RoleMonitor},
			User{Name: "admin", PasswordHash: pw, Role: access.RoleAdmin})
	})
}

// TestClusterMetricsAndAPI: in a 3-node cluster each node exports its raft
// groups on /metrics and /api/cluster: once stable every node has the same
// term for a partition, exactly one reports itself leader and lists lag
// for the two others, the followers report leader 0 and no lag series;
// the metadata group is labelled group="meta" and one node leads it.
func TestClusterMetricsAndAPI(t *testing.T) {
	srvs := startObservedCluster(t)
	w := loginAs(t, srvs[0], "root")
	untilOK(t, w, "TOPIC CREATE orders\r\n", `^\+OK \{`)
	for range 5 {
		untilOK(t, w, "PUB orders - 2\r\nhi\r\n", `^\+OK 0:\d+$`)
	}
	base := func(s *Server) string { return "http://" + s.HTTPAddr().String() }
	const part = `group="",partition="0",topic="orders"`
	const meta = `group="meta",partition="",topic=""`
	scrape := func(s *Server) string {
		code, body := httpGetAs(t, base(s)+"/metrics", "mon")
		if code != 200 {
			t.Fatalf("metrics: %d %s", code, body)
		}
		return string(body)
	}
	var texts []string
	waitFor(t, 30*time.Second, "one leader, equal terms and followers caught up on every node", func() bool {
		texts = texts[:0]
		for _, s := range srvs {
			texts = append(texts, scrape(s))
		}
		leaders, term := 0, -1.0
		for _, txt := range texts {
			tm, ok := series(txt, "fibril_raft_term")[part]
			if !ok || (term >= 0 && tm != term) {
				return false
			}
			term = tm
			leaders += int(series(txt, "fibril_raft_leader")[part])
		}
		if leaders != 1 {
			return false
		}
		for _, txt := range texts {
			if series(txt, "fibril_raft_leader")[part] != 1 {
				continue
			}
			n, sum := 0, 0.0
			for k, v := range series(txt, "fibril_raft_follower_lag") {
				if strings.HasSuffix(k, ","+part) {
					n, sum = n+1, sum+v
				}
			}
			return n == 2 && sum == 0
		}
		return false
	})
	metaLeaders := 0
	for i, txt := range texts {
		name := []string{"n1", "n2", "n3"}[i]
		if n := series(txt, "fibril_cluster_nodes"); n[""] != 3 {
			t.Errorf("%s: fibril_cluster_nodes %v, want 3", name, n)
		}
		commit, applied := series(txt, "fibril_raft_commit_index")[part], series(txt, "fibril_raft_applied_index")[part]
		if commit < 5 || applied > commit {
			t.Errorf("%s: commit %v applied %v for 5 publishes", name, commit, applied)
		}
		if _, ok := series(txt, "fibril_raft_campaigns_total")[part]; !ok {
			t.Errorf("%s: no fibril_raft_campaigns_total", name)
		}
		if _, ok := series(txt, "fibril_raft_dropped_messages_total")[part]; !ok {
			t.Errorf("%s: no fibril_raft_dropped_messages_total", name)
		}
		if _, ok := series(txt, "fibril_raft_term")[meta]; !ok {
			t.Errorf("%s: no metadata group term", name)
		}
		metaLeaders += int(series(txt, "fibril_raft_leader")[meta])
		lag := series(txt, "fibril_raft_follower_lag")
		l, ok := series(txt, "fibril_raft_leader")[part]
		if !ok || (l != 0 && l != 1) {
			t.Errorf("%s: fibril_raft_leader %v (present %v), want 0 or 1", name, l, ok)
		}
		leads := l == 1
		want := 0
		if leads {
			want = 2
		}
		got := 0
		for k := range lag {
			if strings.HasSuffix(k, ","+part) {
				got++
				if strings.Contains(k, `follower="`+name+`"`) {
					t.Errorf("%s reports lag for itself: %s", name, k)
				}
			}
		}
		if got != want {
			t.Errorf("%s (leader %v): %d follower lag series for the partition, want %d: %v", name, leads, got, want, lag)
		}
	}
	if metaLeaders != 1 {
		t.Errorf("%d nodes lead the metadata group", metaLeaders)
	}

	// /api/cluster from every node: the same nodes and leader, followers
	// (with lag) only from the leader, and never a forwarding token.
	var leader string
	for i, s := range srvs {
		code, body := httpGetAs(t, base(s)+"/api/cluster", "mon")
		if code != 200 {
			t.Fatalf("api/cluster: %d %s", code, body)
		}
		if strings.Contains(string(body), srvs[0].cluster.token) || strings.Contains(string(body), s.cluster.token) {
			t.Fatalf("api/cluster shows a forwarding token: %s", body)
		}
		var v clusterAPI
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("decode %s: %v", body, err)
		}
		if want := []string{"n1", "n2", "n3"}[i]; v.Node != want {
			t.Errorf("node %q, want %q", v.Node, want)
		}
		metaLeads := 0
		for j, n := range v.Nodes {
			if n.Name != []string{"n1", "n2", "n3"}[j] || n.Client != srvs[j].Addr().String() {
				t.Errorf("%s: node %d is %+v, want %s at %s", v.Node, j, n, []string{"n1", "n2", "n3"}[j], srvs[j].Addr())
			}
			if n.LeaderOfMeta {
				metaLeads++
			}
		}
		if len(v.Nodes) != 3 || metaLeads != 1 {
			t.Errorf("%s: nodes %+v", v.Node, v.Nodes)
		}
		if len(v.Partitions) != 1 || v.Partitions[0].Topic != "orders" || v.Partitions[0].Partition != 0 {
			t.Fatalf("%s: partitions %+v", v.Node, v.Partitions)
		}
		p := v.Partitions[0]
		if leader == "" {
			leader = p.Leader
		} else if p.Leader != leader {
			t.Errorf("%s says %s leads, another node said %s", v.Node, p.Leader, leader)
		}
		if p.Term == 0 || p.Commit < 5 {
			t.Errorf("%s: partition %+v", v.Node, p)
		}
		if (p.Leader == v.Node) != (len(p.Followers) == 2) || (p.Leader != v.Node && p.Followers != nil) {
			t.Errorf("%s (leader %s): followers %+v", v.Node, p.Leader, p.Followers)
		}
		for _, f := range p.Followers {
			if f.Name == v.Node || f.Match == 0 {
				t.Errorf("%s: follower %+v", v.Node, f)
			}
		}
	}
}

// TestClusterAPIPermissions: /api/cluster needs the monitor or admin role,
// as /metrics does: without credentials 401, a user without a role 403
// (on every node), monitor and admin 200.
func TestClusterAPIPermissions(t *testing.T) {
	srvs := startObservedCluster(t)
	for _, s := range srvs {
		url := "http://" + s.HTTPAddr().String() + "/api/cluster"
		for _, tc := range []struct {
			user string
			want int
		}{{"", 401}, {"orders", 403}, {"root", 403}, {"mon", 200}, {"admin", 200}} {
			if code, body := httpGetAs(t, url, tc.user); code != tc.want {
				t.Errorf("GET /api/cluster as %q: %d, want %d: %s", tc.user, code, tc.want, body)
			}
		}
	}
}

// TestClusterAPISingleNode: a single node answers /api/cluster with an
// empty node name and no nodes or partitions, and /metrics has no raft
// series.
func TestClusterAPISingleNode(t *testing.T) {
	s := startServer(t, func(o *Options) {
		durableFiles(o)
		o.HTTPListen = "127.0.0.1:0"
		o.Token = "s3cret"
	})
	base := "http://" + s.HTTPAddr().String()
	code, body := httpGet(t, base+"/api/cluster", "s3cret")
	if code != 200 || strings.TrimSpace(string(body)) != `{"node":"","nodes":[],"partitions":[],"unanswered":0}` {
		t.Fatalf("single node /api/cluster: %d %s", code, body)
	}
	_, m := httpGet(t, base+"/metrics", "s3cret")
	if strings.Contains(string(m), "fibril_raft_") || strings.Contains(string(m), "fibril_cluster_") {
		t.Fatalf("single node exports cluster series")
	}
}

// stuckGroup is a group whose goroutine never answers: Status waits for
// its context. asked counts the calls.
type stuckGroup struct{ asked int }

func (g *stuckGroup) Status(ctx context.Context) (cluster.Status, error) {
	g.asked++
	<-ctx.Done()
	return cluster.Status{}, ctx.Err()
}

// TestAskStatusBoundsAStuckGroup: a group that never answers costs the
// view its own bound (askStatus returns, unanswered, even under a context
// without a deadline), and once the caller's context has ended no group is
// asked at all.
func TestAskStatusBoundsAStuckGroup(t *testing.T) {
	g := &stuckGroup{}
	if _, ok := askStatus(context.Background(), g, nil); ok || g.asked != 1 {
		t.Fatalf("stuck group: answered %v, asked %d", ok, g.asked)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := askStatus(ctx, g, nil); ok || g.asked != 1 {
		t.Fatalf("after the deadline: answered %v, asked %d times", ok, g.asked)
	}
}

func TestRaftGroupOf(t *testing.T) {
	n1, n2, n3 := cluster.NodeID("n1"), cluster.NodeID("n2"), cluster.NodeID("n3")
	byID := map[uint64]string{n1: "n1", n2: "n2", n3: "n3"}
	for _, tc := range []struct {
		name string
		st   cluster.Status
		want admin.RaftGroup
	}{
		{"follower", cluster.Status{ID: n2, Leader: n1, Role: "follower", Term: 4, Commit: 9, Applied: 8, Last: 9, Campaigns: 1, Dropped: 2},
			admin.RaftGroup{Role: "follower", Leader: "n1", Term: 4, Commit: 9, Applied: 8, Last: 9, Campaigns: 1, Dropped: 2}},
		{"no leader", cluster.Status{ID: n2, Role: "candidate", Term: 5},
			admin.RaftGroup{Role: "candidate", Term: 5}},
		{"leader", cluster.Status{ID: n1, Leader: n1, Role: "leader", Term: 4, Commit: 9, Last: 10,
			Match: map[uint64]uint64{n1: 10, n3: 4, n2: 10}},
			admin.RaftGroup{Role: "leader", Leader: "n1", Term: 4, Commit: 9, Last: 10,
				Followers: []admin.Follower{{Name: "n2", Match: 10}, {Name: "n3", Match: 4, Lag: 6}}}},
		{"match past last, unknown replica", cluster.Status{ID: n1, Leader: n1, Role: "leader", Last: 10,
			Match: map[uint64]uint64{n1: 10, 0xab: 12}},
			admin.RaftGroup{Role: "leader", Leader: "n1", Last: 10, Followers: []admin.Follower{{Name: "id-ab", Match: 12}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := raftGroupOf(tc.st, byID); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
