package server

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/clustertest"
	"github.com/fibrilmq/fibril/protocol"
)

// placedCluster is n servers in this process, each a node of one
// cluster over mutual TLS on loopback, each of which the test may stop
// (kill) on its own.
type placedCluster struct {
	t     *testing.T
	names []string
	srvs  []*Server
	stops []func()
}

func startPlacedCluster(t *testing.T, n int) *placedCluster {
	t.Helper()
	pc := &placedCluster{t: t}
	for i := range n {
		pc.names = append(pc.names, fmt.Sprintf("n%d", i+1))
	}
	members := clustertest.Members(t, pc.names...)
	for _, name := range pc.names {
		m := members[name]
		s, err := New(testOptions(t, func(o *Options) {
			o.NoBroker = false
			o.Engine.SegmentSize, o.Engine.EventSegmentSize = 4<<20, 1<<20
			o.Cluster = &ClusterOptions{Name: name, Listen: m.Addr, Peers: m.Peers, TLS: m.TLS,
				Tick: 20 * time.Millisecond, ElectionTicks: 10}
		}))
		if err != nil {
			t.Fatalf("New %s: %v", name, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		select {
		case <-s.Ready():
		case err := <-done:
			cancel()
			t.Fatalf("%s: Run: %v", name, err)
		case <-time.After(10 * time.Second):
			cancel()
			t.Fatalf("%s: not ready in 10 s", name)
		}
		stopped := false
		stop := func() {
			if stopped {
				return
			}
			stopped = true
			cancel()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				t.Errorf("%s did not stop in 15 s", name)
			}
		}
		t.Cleanup(stop)
		pc.srvs, pc.stops = append(pc.srvs, s), append(pc.stops, stop)
	}
	for _, s := range pc.srvs {
		waitFor(t, 30*time.Second, "every node announced", func() bool { return len(s.connectURLs()) == n })
	}
	return pc
}

// topicInfo asks w for TOPIC INFO of topic.
func placedTopicInfo(t *testing.T, w *wireConn, topic string) protocol.TopicInfo {
	t.Helper()
	l := untilOK(t, w, "TOPIC INFO "+topic+"\r\n", `^\+OK \{`)
	var ti protocol.TopicInfo
	if err := json.Unmarshal([]byte(strings.TrimPrefix(l, "+OK ")), &ti); err != nil {
		t.Fatalf("TOPIC INFO %s: %v in %q", topic, err, l)
	}
	return ti
}

// holdersOf is each partition's replicas as node indexes of pc.
func (pc *placedCluster) holdersOf(ti protocol.TopicInfo) [][]int {
	var out [][]int
	for _, p := range ti.Partitions {
		var hs []int
		for _, name := range p.Replicas {
			hs = append(hs, slices.Index(pc.names, name))
		}
		out = append(out, hs)
	}
	return out
}

// checkDirs fails unless exactly the holders of each partition of ti have
// its directory (topics/<id>/<partition>) in their data directory.
func (pc *placedCluster) checkDirs(ti protocol.TopicInfo, skip ...int) {
	pc.t.Helper()
	for i, s := range pc.srvs {
		if slices.Contains(skip, i) {
			continue
		}
		for _, p := range ti.Partitions {
			dir := filepath.Join(s.opts.DataDir, "topics", strconv.FormatUint(ti.ID, 10), strconv.Itoa(int(p.Partition)))
			_, err := os.Stat(filepath.Join(dir, "data"))
			holds := slices.Contains(p.Replicas, pc.names[i])
			if holds && err != nil {
				pc.t.Errorf("%s holds %s partition %d but its data dir lacks it: %v", pc.names[i], ti.Name, p.Partition, err)
			}
			if _, derr := os.Stat(dir); !holds && !os.IsNotExist(derr) {
				pc.t.Errorf("%s holds no replica of %s partition %d but has %s (%v)", pc.names[i], ti.Name, p.Partition, dir, derr)
			}
		}
	}
}

// publishEach publishes per messages from each live node (keyed k, so
// they spread over the partitions), each confirmed, and returns their
// bodies.
func publishEach(t *testing.T, conns map[int]*wireConn, topic, tag string, per int) []string {
	t.Helper()
	var bodies []string
	for _, i := range mapsKeys(conns) {
		for k := range per {
			body := fmt.Sprintf("%s-n%d-%d", tag, i, k)
			key := strconv.Itoa(k)
			hdr := "NATS/1.0\r\nFibril-Key: " + key + "\r\n\r\n"
			untilOK(t, conns[i], fmt.Sprintf("HPUB %s %d %d\r\n%s%s\r\n", topic, len(hdr), len(hdr)+len(body), hdr, body), `^\+OK \d+:\d+$`)
			bodies = append(bodies, body)
		}
	}
	return bodies
}

func mapsKeys(m map[int]*wireConn) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// drainEach polls group w of topic from every live node in turn, acking
// what each gets on the node that got it, until want are all delivered;
// it fails after a bounded number of rounds.
func drainEach(t *testing.T, conns map[int]*wireConn, topic string, want []string) {
	t.Helper()
	got := map[string]bool{}
	for range 200 {
		for _, i := range mapsKeys(conns) {
			w := conns[i]
			w.send("POLL " + topic + " w 100 100\r\n")
			var handles []string
			for {
				l := w.expect(`^(HMSG|\+OK|-ERR)`)
				if !strings.HasPrefix(l, "HMSG") {
					if strings.HasPrefix(l, "-ERR") && !strings.Contains(l, "not_leader") {
						t.Fatalf("POLL on n%d: %s", i+1, l)
					}
					break
				}
				handles = append(handles, strings.Fields(l)[3])
				w.expect(`^NATS/1.0`)
				w.expect(`^Fibril-Key`)
				w.expect(`^$`)
				body, err := w.line()
				if err != nil {
					t.Fatal(err)
				}
				got[body] = true
			}
			if len(handles) > 0 {
				untilOK(t, w, "ACK "+strings.Join(handles, " ")+"\r\n", `^\+OK$`)
			}
		}
		missing := 0
		for _, b := range want {
			if !got[b] {
				missing++
			}
		}
		if missing == 0 {
			return
		}
	}
	var missing []string
	for _, b := range want {
		if !got[b] {
			missing = append(missing, b)
		}
	}
	t.Fatalf("%d confirmed messages never delivered: %v", len(missing), missing)
}

// TestClusterReplicasFewerThanNodes: on 3 nodes, a topic with replicas 1
// and one with replicas 2 place each partition on that many nodes, the
// same placement on every node (TOPIC INFO, GROUP INFO); only the holders
// have the partition's files; every node, holder or not, takes publishes
// and serves consumers for every partition (forwarded to the holders);
// TOPIC INFO on any node counts every partition's messages; a count
// above the nodes or below 1 is refused.
func TestClusterReplicasFewerThanNodes(t *testing.T) {
	pc := startPlacedCluster(t, 3)
	conns := map[int]*wireConn{}
	for i, s := range pc.srvs {
		conns[i] = fibrilConn(t, s, "")
	}
	untilOK(t, conns[0], `TOPIC CREATE big {"replicas":4}`+"\r\n", `^-ERR 'invalid_config .*replicas 4: this cluster has 3 node\(s\): give 1\.\.3`)
	untilOK(t, conns[0], `TOPIC CREATE none {"replicas":0}`+"\r\n", `^-ERR 'invalid_config .*replicas 0 out of range \[1, 5\]`)
	for _, r := range []int{1, 2} {
		topic := fmt.Sprintf("r%d", r)
		untilOK(t, conns[1], fmt.Sprintf(`TOPIC CREATE %s {"replicas":%d,"partitions":3}`+"\r\n", topic, r), `^\+OK \{`)
		untilOK(t, conns[2], "GROUP CREATE "+topic+" w {\"lease_ms\":60000}\r\n", `^\+OK \{`)
		ti := placedTopicInfo(t, conns[0], topic)
		holders := pc.holdersOf(ti)
		seen := map[int]bool{}
		for p, hs := range holders {
			if len(hs) != r || slices.Contains(hs, -1) {
				t.Fatalf("%s partition %d placed on %v, want %d of %v", topic, p, ti.Partitions[p].Replicas, r, pc.names)
			}
			for _, h := range hs {
				seen[h] = true
			}
		}
		if len(seen) != 3 {
			t.Errorf("%s: its 3 partitions are on %d of 3 nodes (%v): not spread", topic, len(seen), holders)
		}
		for i := 1; i < 3; i++ { // every node records the same placement
			if other := pc.holdersOf(placedTopicInfo(t, conns[i], topic)); !slices.EqualFunc(other, holders, slices.Equal) {
				t.Fatalf("%s placed %v on n1, %v on n%d", topic, holders, other, i+1)
			}
		}
		gl := untilOK(t, conns[0], "GROUP INFO "+topic+" w\r\n", `^\+OK \{`)
		if !strings.Contains(gl, `"replicas":["`) {
			t.Errorf("GROUP INFO shows no placement: %s", gl)
		}
		pc.checkDirs(ti)

		bodies := publishEach(t, conns, topic, "a", 6)
		if ti := placedTopicInfo(t, conns[0], topic); ti.Msgs != uint64(len(bodies)) {
			t.Errorf("TOPIC INFO %s on n1 counts %d messages, want %d: %+v", topic, ti.Msgs, len(bodies), ti.Partitions)
		}
		drainEach(t, conns, topic, bodies)
		pc.checkDirs(placedTopicInfo(t, conns[2], topic))
	}
}

// TestClusterR3OnFiveNodesSurvivesKills: on 5 nodes a topic of replicas
// 3 and one partition has two nodes holding nothing of it. Killing one
// of those loses nothing and stops nothing; killing then the leader
// among the holders keeps the partition served (the other two elect
// one), and every message confirmed before and after is delivered, to a
// consumer on a node that holds no replica.
func TestClusterR3OnFiveNodesSurvivesKills(t *testing.T) {
	if testing.Short() {
		t.Skip("five nodes")
	}
	pc := startPlacedCluster(t, 5)
	conns := map[int]*wireConn{}
	for i, s := range pc.srvs {
		conns[i] = fibrilConn(t, s, "")
	}
	untilOK(t, conns[0], `TOPIC CREATE r3 {"replicas":3}`+"\r\n", `^\+OK \{`)
	untilOK(t, conns[0], "GROUP CREATE r3 w {\"lease_ms\":60000}\r\n", `^\+OK \{`)
	ti := placedTopicInfo(t, conns[3], "r3")
	holders := pc.holdersOf(ti)[0]
	if len(holders) != 3 {
		t.Fatalf("placed on %v, want 3 nodes", ti.Partitions[0].Replicas)
	}
	var others []int
	for i := range 5 {
		if !slices.Contains(holders, i) {
			others = append(others, i)
		}
	}
	pc.checkDirs(ti)
	confirmed := publishEach(t, conns, "r3", "before", 4)

	// Kill a node holding no replica: every other node still takes
	// publishes, nothing confirmed is lost.
	pc.stops[others[0]]()
	delete(conns, others[0])
	confirmed = append(confirmed, publishEach(t, conns, "r3", "nonholder-down", 4)...)

	// Kill the holder serving the partition: the other two elect a leader.
	lead := -1
	waitFor(t, 30*time.Second, "a holder serving r3", func() bool {
		for _, h := range holders {
			if tp, ok := pc.srvs[h].durable.b.Topic("r3"); ok && tp.Served(0) {
				lead = h
				return true
			}
		}
		return false
	})
	pc.stops[lead]()
	delete(conns, lead)
	confirmed = append(confirmed, publishEach(t, conns, "r3", "holder-down", 4)...)

	// Every confirmed message reaches a consumer on the live node holding
	// no replica (its POLLs forwarded to the holders).
	consumer := map[int]*wireConn{others[1]: conns[others[1]]}
	drainEach(t, consumer, "r3", confirmed)
	if got := placedTopicInfo(t, conns[others[1]], "r3"); got.Msgs == 0 {
		t.Errorf("TOPIC INFO on a node holding nothing counts no messages: %+v", got)
	}
}
