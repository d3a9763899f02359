package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fibrilmq/fibril/server/broker"
)

// findChromium returns the browser binary: $FIBRIL_CHROMIUM, or the first of
// the usual names on PATH; "" when there is none.
func findChromium() string {
	if p := os.Getenv("FIBRIL_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser starts headless Chromium for the test and returns a tab context.
func browser(t *testing.T) context.Context {
	t.Helper()
	bin := findChromium()
	if bin == "" {
		t.Skip("chromium not found: install it (apt-get install -y chromium) or set FIBRIL_CHROMIUM to run the dashboard browser test")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	// Start the browser now so a broken install fails here, with its error.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	return ctx
}

// textOf reads the text of the first element matching sel (within 10 s),
// "" when there is none. It reads in one script call because the page
// rebuilds its tables on every poll, which would stale a node looked up first.
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	q, err := json.Marshal(sel)
	if err != nil {
		t.Fatal(err)
	}
	s, err := chromedp.Run(tctx, chromedp.Evaluate[string](`(document.querySelector(`+string(q)+`) || {textContent: ""}).textContent`))
	if err != nil {
		t.Fatalf("read %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
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
	s := startAdmin(t, Options{Broker: staticBroker(b), ServerName: "dashboard-test", Conns: connList{{ID: 1}}})

	orders, err := b.CreateTopic("orders", broker.TopicConfig{Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	billing, err := orders.Group("billing", broker.GroupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	audit, err := orders.Group("audit", broker.GroupConfig{MaxDeliveries: 1})
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
	waitFor(t, 10*time.Second, "the message history", func() bool {
		return strings.Contains(textOf(t, ctx, "#b-history"), "published")
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
