package server

import (
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/stagetime"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// stageHist is one stage's histogram from /metrics.
type stageHist struct {
	count uint64
	sum   float64
}

func (h stageHist) mean() float64 { return h.sum / float64(h.count) }

// scrapeStages reads fibril_stage_seconds (by stage) and the runtime pause
// histograms' counts from the admin listener at base.
func scrapeStages(t *testing.T, base string) (map[string]stageHist, map[string]uint64) {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	stages := map[string]stageHist{}
	if f := fams["fibril_stage_seconds"]; f != nil {
		for _, m := range f.GetMetric() {
			name := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "stage" {
					name = l.GetValue()
				}
			}
			h := m.GetHistogram()
			stages[name] = stageHist{count: h.GetSampleCount(), sum: h.GetSampleSum()}
		}
	}
	runtimeCounts := map[string]uint64{}
	for _, n := range []string{"fibril_go_gc_pause_seconds", "fibril_go_sched_latency_seconds"} {
		if f := fams[n]; f != nil && len(f.GetMetric()) == 1 {
			runtimeCounts[n] = f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return stages, runtimeCounts
}

// TestStagesInMetrics: publishes over loopback, each in a read of its
// own, then a POLL and an ACK; every stage of /metrics' stage accounting
// moves, and along each chain the stages' mean times (cumulative from the
// chain's origin, over the same sampled commands) never go down.
func TestStagesInMetrics(t *testing.T) {
	s := startServer(t, func(o *Options) {
		durableFiles(o)
		o.HTTPListen = "127.0.0.1:0"
		o.Engine.Stages = stagetime.NewRecorder(0) // every read a sample
	})
	base := "http://" + s.HTTPAddr().String()
	w := fibrilConn(t, s, "")
	w.send(`TOPIC CREATE st {"partitions":1,"durability":"group"}` + "\r\n")
	w.expect(`^\+OK \{`)
	const n = 20
	for i := 1; i <= n; i++ {
		w.send("PUB st 5\r\nhello\r\n")
		w.expect(`^\+OK 0:` + strconv.Itoa(i) + `$`)
	}
	w.send("POLL st g 1\r\n")
	h := w.expectDelivery(`^MSG st 0 \S+ 5$`, "hello")
	w.expect(`^\+OK 1$`)
	w.send("ACK " + h + "\r\n")
	w.expect(`^\+OK$`)
	// a push subscription's first delivery is a sample too
	p := fibrilConn(t, s, "")
	p.send("SUB st g2 9 1\r\n")
	p.expectMixed([]string{"+OK"}, 1)
	runtime.GC() // at least one pause to count

	publish := []string{"parsed", "enqueued", "picked_up", "appended", "fsync_start", "fsync_end", "confirmed", "confirm_written"}
	var stages map[string]stageHist
	var rt map[string]uint64
	waitFor(t, 5*time.Second, "every stage in /metrics", func() bool {
		stages, rt = scrapeStages(t, base)
		for _, name := range append(publish, "ack_parsed", "ack_durable") {
			if stages[name].count == 0 {
				return false
			}
		}
		// the POLL's delivery and the push subscription's
		return stages["delivery_written"].count >= 2
	})
	if c := stages["parsed"].count; c < n {
		t.Fatalf("%d publishes sampled, want every one of %d (each came in a read of its own)", c, n)
	}
	for _, name := range publish {
		if c := stages[name].count; c != stages["parsed"].count {
			t.Errorf("stage %s counted %d samples, parsed %d: one publish per round, each sampled", name, c, stages["parsed"].count)
		}
	}
	check := func(chain []string) {
		for i := 1; i < len(chain); i++ {
			a, b := stages[chain[i-1]], stages[chain[i]]
			if b.mean() < a.mean() {
				t.Errorf("stage %s (mean %.1f µs) before %s (mean %.1f µs): cumulative times went down",
					chain[i], b.mean()*1e6, chain[i-1], a.mean()*1e6)
			}
		}
	}
	check(publish)
	check([]string{"ack_parsed", "ack_durable"})
	// a commit on a real file takes a while; a stage left at zero would be
	// a hook that records the wrong origin
	if stages["fsync_end"].sum <= stages["fsync_start"].sum {
		t.Errorf("fsync_end sum %v not above fsync_start's %v", stages["fsync_end"].sum, stages["fsync_start"].sum)
	}
	for _, name := range []string{"fibril_go_gc_pause_seconds", "fibril_go_sched_latency_seconds"} {
		if rt[name] == 0 {
			t.Errorf("%s: no samples", name)
		}
	}
	if t.Failed() {
		var b strings.Builder
		for _, name := range append(publish, "delivery_written", "ack_parsed", "ack_durable") {
			b.WriteString(name + "=" + strconv.FormatUint(stages[name].count, 10) + "/" + strconv.FormatFloat(stages[name].mean()*1e6, 'f', 1, 64) + "µs ")
		}
		t.Log(b.String())
	}
}
