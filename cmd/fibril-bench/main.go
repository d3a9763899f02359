// Command fibril-bench measures a Fibril server — and, for comparison,
// nats-server (JetStream work queue or NATS core) — with the same workload,
// payload format and verification: N publishers and M consumers over
// loopback TCP, then publish and consume rates, end-to-end latency
// percentiles (publish to delivery, and publish to confirm: Fibril's wire
// client, JetStream's publish ack), the server's peak RSS and a check that every message arrived
// exactly once with intact content (exit 1 if not).
//
// The Fibril clients speak the wire directly through the protocol package
// (no SDK), pipelining publishes up to the confirm window and acks with the
// next POLL; the NATS clients are nats.go and its jetstream package. See
// bench/README.md for the method and bench/compare.sh for the side-by-side
// run.
//
// Against a cluster (--url with several nodes) the clients connect to the
// node leading what they use, or to a follower (cluster.go).
//
// It must never report a run as good when a message was lost, doubled or
// damaged, and never leave a server it started running: it stops them by
// PID (SIGTERM, then SIGKILL after 10 s).
//
// Exit codes: 0 run completed and verified, 1 run failed or verification
// failed, 2 bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "fibril-bench: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if cfg.DiskProbe > 0 {
		return runDiskProbe(ctx, cfg, stdout, stderr)
	}
	res, err := runBench(ctx, cfg, stderr)
	if res != nil && err != nil && res.Verify.Summary == "" {
		res.Verify.Summary = "run did not complete: " + err.Error()
	}
	if res != nil {
		if perr := printReport(stdout, res, cfg.JSON); perr != nil {
			fmt.Fprintf(stderr, "fibril-bench: %v\n", perr)
			return 1
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "fibril-bench: %v\n", err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

// runDiskProbe is `fibril-bench --disk-probe D`.
func runDiskProbe(ctx context.Context, cfg Config, stdout, stderr io.Writer) int {
	r, err := probeDisk(ctx, cfg.DiskProbeDir, cfg.DiskProbeBlock, cfg.DiskProbe)
	if err == nil {
		err = printReport(stdout, r, cfg.JSON)
	}
	if err != nil {
		fmt.Fprintf(stderr, "fibril-bench: %v\n", err)
		return 1
	}
	return 0
}
