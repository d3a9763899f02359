// Package browsertest drives headless Chromium for the dashboard tests
// (package admin's, and package server's against a running cluster): Start
// opens a tab for the length of a test, Text reads an element's text.
//
// It is test support only and must never be imported by non-test code (it
// calls testing.TB's Skip, Fatal and Cleanup). A test skips, with the way to
// install it, when no browser is found.
package browsertest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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

// Start starts headless Chromium for the test and returns a tab context,
// closed (with the browser) when the test ends. It skips the test when no
// browser is found, and fails it when the browser does not start.
func Start(t testing.TB) context.Context {
	t.Helper()
	bin := findChromium()
	if bin == "" {
		t.Skip("chromium not found: install it (apt-get install -y chromium) or set FIBRIL_CHROMIUM to run the dashboard browser tests")
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

// Text reads the text of the first element matching sel (within 10 s),
// "" when there is none. It reads in one script call because the
// dashboard rebuilds its tables on every poll, which would stale a node
// looked up first.
func Text(t testing.TB, ctx context.Context, sel string) string {
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
