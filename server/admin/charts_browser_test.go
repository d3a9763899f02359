package admin

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fibrilmq/fibril/server/broker"
)

// eval runs a script in the page (10 s bound) and returns its value.
func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(tctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate: %v", err)
	}
	return v
}

// redeliveries keeps a group's leases running out: it polls g (lease
// 100 ms) and never settles, so every message comes back, redelivered.
func redeliveries(t *testing.T, g *broker.Group) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if _, err := g.Poll(ctx, 4); err != nil {
				return // ctx ended
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// chartsDrawn is the page's verdict on each chart: how many samples it
// holds, whether one of them is above zero, and how many pixels of the
// plot area carry its series colour (the line and its fill were drawn).
const chartsDrawn = `(() => {
  const fc = window.FibrilCharts;
  if (!fc) return {};
  const out = {};
  for (const [id, u] of Object.entries(fc.charts)) {
    const vals = fc.values.get(id);
    const stroke = u.series[1].stroke();
    const want = [1, 3, 5].map((i) => parseInt(stroke.slice(i, i + 2), 16));
    const { left, top, width, height } = u.bbox;
    let lit = 0;
    if (width > 0 && height > 0) {
      const px = u.ctx.getImageData(left, top, width, height).data;
      for (let i = 0; i < px.length; i += 4) {
        if (px[i + 3] > 200 && Math.abs(px[i] - want[0]) < 12 && Math.abs(px[i + 1] - want[1]) < 12 && Math.abs(px[i + 2] - want[2]) < 12) lit++;
      }
    }
    out[id] = { samples: vals.length, positive: vals.some((v) => v > 0), lit };
  }
  return out;
})()`

type chartState struct {
	Samples  int  `json:"samples"`
	Positive bool `json:"positive"`
	Lit      int  `json:"lit"`
}

// TestChartsDrawWithData: the dashboard draws its six charts (published,
// delivered, acked, backlog, redeliveries, fsync latency) with uPlot, from
// the page's own files only, and under traffic every chart holds values
// above zero and has its line on the canvas. (The dashboard had tables
// and sparklines that stayed flat.)
func TestChartsDrawWithData(t *testing.T) {
	ctx := browser(t)
	b := openBroker(t)
	s := startAdmin(t, Options{Broker: staticBroker(b), ServerName: "charts-test"})
	orders, err := b.CreateTopic("orders", broker.TopicConfig{})
	if err != nil {
		t.Fatal(err)
	}
	billing, err := orders.Group("billing", broker.GroupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	slow, err := orders.Group("slow", broker.GroupConfig{LeaseMs: 100, MaxDeliveries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer traffic(t, orders, billing)()
	defer redeliveries(t, slow)()

	nctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(nctx, chromedp.Navigate(s.URL()+"/"), chromedp.WaitVisible(chromedp.CSS("#chart-fsync canvas"))); err != nil {
		t.Fatalf("load dashboard: %v", err)
	}
	if !eval[bool](t, ctx, `[...document.querySelectorAll("script[src], link[href]")].every((e) => (e.src || e.href).startsWith(location.origin + "/ui/"))`) {
		t.Fatal("the page loads something that is not its own /ui/ file")
	}
	want := []string{"published", "delivered", "acked", "backlog", "redelivered", "fsync"}
	var got map[string]chartState
	waitFor(t, 30*time.Second, "every chart to draw values above zero", func() bool {
		got = eval[map[string]chartState](t, ctx, chartsDrawn)
		for _, id := range want {
			c, ok := got[id]
			if !ok || c.Samples < 3 || !c.Positive || c.Lit < 20 {
				return false
			}
		}
		return len(got) == len(want)
	})
	t.Logf("charts: %+v", got)
}

// TestDashboardCountersAfterRestart: after the engine restarts, the
// dashboard's groups table shows the redelivered and dead-lettered counts
// the engine and the API report, which are those from before the restart
// (they read 0 while the dead-letter table showed 3).
func TestDashboardCountersAfterRestart(t *testing.T) {
	ctx := browser(t)
	dir := t.TempDir()
	open := func() *broker.Broker {
		o := broker.DefaultOptions()
		o.SegmentSize, o.EventSegmentSize, o.Logf = 1<<20, 1<<20, t.Logf
		b, err := broker.Open(dir, o)
		if err != nil {
			t.Fatalf("broker.Open: %v", err)
		}
		return b
	}
	var cur atomic.Pointer[broker.Broker]
	cur.Store(open())
	t.Cleanup(func() {
		if err := cur.Load().Close(); err != nil {
			t.Error(err)
		}
	})
	s := startAdmin(t, Options{Broker: cur.Load, ServerName: "restart-test"})

	b := cur.Load()
	jobs, err := b.CreateTopic("jobs", broker.TopicConfig{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := jobs.Group("workers", broker.GroupConfig{MaxDeliveries: 2})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, jobs, 3)
	pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer pcancel()
	// Each message: delivered, nacked, redelivered, nacked at its last
	// allowed delivery: 3 redelivered, 3 dead-lettered.
	for round := 0; round < 2; round++ {
		ds, err := g.Poll(pctx, 3)
		if err != nil || len(ds) != 3 {
			t.Fatalf("round %d: poll %d, %v", round, len(ds), err)
		}
		for _, d := range ds {
			if err := d.Nack(pctx, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, 10*time.Second, "3 dead letters", func() bool { return g.Info().DeadLettered == 3 })

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	cur.Store(open())
	jobs, _ = cur.Load().Topic("jobs")
	g, _ = jobs.FindGroup("workers")
	engine := g.Info().GroupCounters

	var ov Overview
	getJSON(t, s.URL()+"/api/topics", &ov)
	var api broker.GroupCounters
	for _, tp := range ov.Topics {
		for _, gs := range tp.Groups {
			if tp.Name == "jobs" && gs.Name == "workers" {
				api = gs.GroupCounters
			}
		}
	}
	nctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	row := `#groups tr[data-topic="jobs"][data-group="workers"] `
	if err := chromedp.Do(nctx, chromedp.Navigate(s.URL()+"/"), chromedp.WaitVisible(chromedp.CSS(row+`td[data-k="dead-lettered"]`))); err != nil {
		t.Fatalf("load dashboard: %v", err)
	}
	cellNum := func(k string) uint64 {
		n, err := strconv.ParseUint(textOf(t, ctx, row+`td[data-k="`+k+`"]`), 10, 64)
		if err != nil {
			t.Fatalf("%s cell: %v", k, err)
		}
		return n
	}
	page := [2]uint64{cellNum("redelivered"), cellNum("dead-lettered")}
	want := [2]uint64{3, 3}
	if page != want || [2]uint64{api.Redelivered, api.DeadLettered} != want || [2]uint64{engine.Redelivered, engine.DeadLettered} != want {
		t.Fatalf("after the restart, redelivered/dead-lettered: dashboard %v, API %v/%v, engine %v/%v; want %v",
			page, api.Redelivered, api.DeadLettered, engine.Redelivered, engine.DeadLettered, want)
	}
	if dlq := textOf(t, ctx, `#dlq tr[data-topic="$DLQ.jobs.workers"] td[data-k="published"]`); dlq != fmt.Sprint(want[1]) {
		t.Fatalf("the dead-letter table says %q received, the groups table %d", dlq, want[1])
	}
}
