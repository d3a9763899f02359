package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fibrilmq/fibril/internal/browsertest"
)

// TestClusterDashboardInBrowser: the dashboard of a node of a 3-node
// cluster shows the Cluster panel: the three nodes with their client
// addresses and one catalog leader, and the partition's leader; on the
// leader's dashboard the two followers' lag, on a follower's the name of
// the node that knows it.
func TestClusterDashboardInBrowser(t *testing.T) {
	ctx := browsertest.Start(t)
	srvs := startCluster(t, false, func(o *Options) { o.HTTPListen = "127.0.0.1:0" })
	w := fibrilConn(t, srvs[0], "")
	untilOK(t, w, "TOPIC CREATE orders\r\n", `^\+OK \{`)
	untilOK(t, w, "PUB orders - 2\r\nhi\r\n", `^\+OK 0:1$`)
	names := []string{"n1", "n2", "n3"}
	lead := -1
	waitFor(t, 30*time.Second, "a leader for orders/0", func() bool {
		for i, s := range srvs {
			if v := (clusterSource{s}).ClusterView(context.Background()); len(v.Partitions) == 1 && v.Partitions[0].Role == "leader" {
				lead = i
				return true
			}
		}
		return false
	})
	const (
		row     = `#cl-parts tr[data-topic="orders"][data-partition="0"] `
		leadSel = row + `td[data-k="leader"]`
		lagSel  = row + `td[data-k="lag"]`
	)
	open := func(s *Server) {
		t.Helper()
		nctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(nctx, chromedp.Navigate("http://"+s.HTTPAddr().String()+"/"), chromedp.WaitVisible(chromedp.CSS(leadSel))); err != nil {
			t.Fatalf("load the dashboard of %s: %v", s.opts.Cluster.Name, err)
		}
	}

	open(srvs[lead])
	var want []string
	for i, n := range names {
		if i != lead {
			want = append(want, n+": 0")
		}
	}
	waitFor(t, 20*time.Second, "the followers caught up on the leader's panel", func() bool {
		return browsertest.Text(t, ctx, lagSel) == strings.Join(want, ", ")
	})
	if got := browsertest.Text(t, ctx, leadSel); got != names[lead] {
		t.Errorf("leader cell %q, want %s", got, names[lead])
	}
	catalogLeaders := 0
	for i, n := range names {
		r := `#cl-nodes tr[data-node="` + n + `"] `
		if got := browsertest.Text(t, ctx, r+`td[data-k="client"]`); got != srvs[i].Addr().String() {
			t.Errorf("%s's client address %q, want %s", n, got, srvs[i].Addr())
		}
		if browsertest.Text(t, ctx, r+`td[data-k="catalog"]`) == "leader" {
			catalogLeaders++
		}
	}
	if catalogLeaders != 1 {
		t.Errorf("%d catalog leaders on the panel", catalogLeaders)
	}
	if got := browsertest.Text(t, ctx, `#cl-nodes tr[data-node="`+names[lead]+`"] td[data-k="name"]`); got != names[lead]+" (this node)" {
		t.Errorf("this node's row: %q", got)
	}

	follower := (lead + 1) % len(srvs)
	open(srvs[follower])
	waitFor(t, 20*time.Second, "the follower's panel to name the leader", func() bool {
		return browsertest.Text(t, ctx, leadSel) == names[lead] && browsertest.Text(t, ctx, lagSel) == "known to "+names[lead]
	})
}
