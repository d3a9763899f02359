package admin

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fibrilmq/fibril/internal/browsertest"
	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/wire"
)

// browser starts headless Chromium for the test (browsertest.Start).
func browser(t *testing.T) context.Context { return browsertest.Start(t) }

// textOf reads the text of the first element matching sel (browsertest.Text).
func textOf(t *testing.T, ctx context.Context, sel string) string {
	return browsertest.Text(t, ctx, sel)
}

// traffic publishes to tp and consumes from g until stop is called. Each
// batch is acked only after the next poll, so some deliveries are always in
// flight while the group's ack floor keeps moving.
func traffic(t *testing.T, tp *broker.Topic, g *broker.Group) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			_, err := tp.Publish(ctx, broker.Message{Subject: string(tp.Name()), Data: []byte("hello")})
			if err != nil && ctx.Err() == nil {
				t.Errorf("publish: %v", err)
				return
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	}()
	go func() {
		defer wg.Done()
		var held []broker.Delivery
		for ctx.Err() == nil {
			ds, err := g.Poll(ctx, 8)
			if err != nil {
				return // ctx ended
			}
			for _, d := range held {
				if err := d.Ack(ctx); err != nil && ctx.Err() == nil {
					t.Errorf("ack: %v", err)
					return
				}
			}
			held = ds
		}
	}()
	return func() { cancel(); wg.Wait() }
}

func TestDashboardInBrowser(t *testing.T) {
	ctx := browser(t)
	b := openBroker(t)
	s := startAdmin(t, Options{Broker: staticBroker(b), ServerName: "dashboard-test", Conns: connList{{ID: 1, Name: "worker-a", Remote: "127.0.0.1:51234"}}})

	orders, err := b.CreateTopic("orders", broker.TopicConfig{Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	billing, err := orders.Group("billing", broker.GroupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	audit, err := orders.Group("audit", broker.GroupConfig{MaxDeliveries: 1, Ordered: wire.OrderKey})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, orders, 5)
	// One rejected message gives the dead-letter table a row.
	pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer pcancel()
	ds, err := audit.Poll(pctx, 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("poll audit: %d, %v", len(ds), err)
	}
	if err := ds[0].Reject(pctx); err != nil {
		t.Fatal(err)
	}
	// Partition 0's first message is leased to connection 1, so its
	// history names the consumer.
	ops, err := orders.Group("ops", broker.GroupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "ops to lease 0:1 to connection 1", func() bool {
		for _, d := range pollAs(t, ops, 8, 1) {
			if d.Handle.Partition == 0 && d.Handle.Seq == 1 {
				return true
			}
		}
		return false
	})

	const (
		pubCell     = `#topics tr[data-topic="orders"] td[data-k="published"]`
		rateCell    = `#topics tr[data-topic="orders"] td[data-k="rate"]`
		settledCell = `#groups tr[data-topic="orders"][data-group="billing"] td[data-k="settled"]`
		dlqRow      = `#dlq tr[data-topic="$DLQ.orders.audit"] td[data-k="unsettled"]`
		dlqButton   = `#dlq tr[data-topic="$DLQ.orders.audit"] button`
	)
	nctx, ncancel := context.WithTimeout(ctx, 20*time.Second)
	defer ncancel()
	if err := chromedp.Do(nctx,
		chromedp.Navigate(s.URL()+"/"),
		chromedp.WaitVisible(chromedp.CSS(pubCell)),
		chromedp.WaitVisible(chromedp.CSS(dlqRow)),
	); err != nil {
		t.Fatalf("load dashboard: %v", err)
	}
	if got := textOf(t, ctx, pubCell); got != "5" {
		t.Fatalf("published before traffic: %q, want 5", got)
	}
	if got := textOf(t, ctx, dlqRow); got != "1" {
		t.Errorf("dead-letter messages: %q, want 1", got)
	}
	for g, want := range map[string]string{"audit": "key", "billing": ""} {
		if got := textOf(t, ctx, `#groups tr[data-topic="orders"][data-group="`+g+`"] td[data-k="ordered"]`); got != want {
			t.Errorf("group %s's ordering cell: %q, want %q", g, got, want)
		}
	}
	if got := textOf(t, ctx, "#conns"); got != "1 connections" {
		t.Errorf("connections: %q", got)
	}
	settled0 := textOf(t, ctx, settledCell)

	stop := traffic(t, orders, billing)
	defer stop()
	// The numbers must move on the page: published changes at least twice,
	// a non-zero rate shows, and the group's settled count grows.
	seen := map[string]bool{}
	var sawRate bool
	waitFor(t, 15*time.Second, "published and settled to move on the page", func() bool {
		seen[textOf(t, ctx, pubCell)] = true
		if r := textOf(t, ctx, rateCell); r != "0.0" && r != "" {
			sawRate = true
		}
		return len(seen) >= 3 && sawRate && textOf(t, ctx, settledCell) != settled0
	})

	// A single node has no Cluster panel (several polls have passed).
	if hidden, err := chromedp.Run(nctx, chromedp.Evaluate[bool](`document.getElementById("cluster").hidden`)); err != nil || !hidden {
		t.Errorf("the Cluster panel shows on a single node (hidden %v, %v)", hidden, err)
	}

	// The requeue button moves the dead letter back to orders.
	if got := textOf(t, ctx, dlqRow); got != "1" {
		t.Fatalf("dead letters waiting before requeue: %q", got)
	}
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()
	clicked, err := chromedp.Run(cctx, chromedp.Evaluate[bool](`(() => { const b = document.querySelector('`+dlqButton+`'); if (b) b.click(); return !!b; })()`))
	if err != nil || !clicked {
		t.Fatalf("click requeue: found %v, %v", clicked, err)
	}
	waitFor(t, 10*time.Second, "the requeue to report and the dead letter to leave", func() bool {
		return strings.Contains(textOf(t, ctx, "#dlq-result"), "requeued 1") && textOf(t, ctx, dlqRow) == "0"
	})

	// Pause from the groups table.
	pauseBtn := `#groups tr[data-topic="orders"][data-group="billing"] button`
	if clicked, err := chromedp.Run(cctx, chromedp.Evaluate[bool](`(() => { const b = document.querySelector('`+pauseBtn+`'); if (b) b.click(); return !!b; })()`)); err != nil || !clicked {
		t.Fatalf("click pause: found %v, %v", clicked, err)
	}
	waitFor(t, 10*time.Second, "the group to pause and the button to say resume", func() bool {
		return billing.Paused() && textOf(t, ctx, pauseBtn) == "resume"
	})

	// The event-log browser lists partition 0's messages; a click on one
	// shows its history.
	if _, err := chromedp.Run(cctx, chromedp.Evaluate[bool](`(() => {
		document.getElementById('b-topic').value = 'orders';
		document.getElementById('b-part').value = '0';
		document.querySelector('#browse-form button[type=submit]').click();
		return true; })()`)); err != nil {
		t.Fatalf("browse: %v", err)
	}
	firstMsg := `#b-table tr.msg td[data-k="seq"]`
	waitFor(t, 10*time.Second, "the message list", func() bool { return textOf(t, ctx, firstMsg) != "" })
	if _, err := chromedp.Run(cctx, chromedp.Evaluate[bool](`(() => { document.querySelector('#b-table tr.msg').click(); return true; })()`)); err != nil {
		t.Fatalf("click message: %v", err)
	}
	waitFor(t, 10*time.Second, "the message history naming its consumer", func() bool {
		h := textOf(t, ctx, "#b-history")
		return strings.Contains(h, "published") && strings.Contains(h, "to conn 1 (worker-a, 127.0.0.1:51234) · group ops")
	})

	png, err := chromedp.Run(nctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot is not a PNG (%d bytes)", len(png))
	}
	dir := os.Getenv("FIBRIL_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "dashboard.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}
