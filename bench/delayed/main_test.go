package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestDelayedShortForm is the benchmark's short form: 3,000 delayed
// messages spread over 2 s through a real `fibril serve` all come, none
// before its due time, with ordinary traffic measured alone and beside
// them. It checks what must hold, never a speed.
func TestDelayedShortForm(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server")
	}
	var out strings.Builder
	res, err := run(context.Background(), config{n: 3000, size: 64, partitions: 2,
		span: 2 * time.Second, lead: time.Second, ordFor: 500 * time.Millisecond, out: &out})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if res.received != 3000 || res.missing != 0 {
		t.Fatalf("%d of 3000 came (%d missing)\n%s", res.received, res.missing, out.String())
	}
	if res.early != 0 {
		t.Fatalf("%d came before their due time\n%s", res.early, out.String())
	}
	if res.ordAlone <= 0 || res.ordWith <= 0 {
		t.Fatalf("ordinary traffic not measured: alone %.0f, beside %.0f\n%s", res.ordAlone, res.ordWith, out.String())
	}
	t.Log(out.String())
}
