// Command worker is a Fibril worker: it processes jobs with concurrency N,
// acks, and nacks with backoff. It is the Go twin of sdk-python's
// examples/worker.py and sdk-js's examples/worker.mjs.
//
//	go run ./sdk/examples/worker -url fibril://127.0.0.1:4222 -topic jobs -group workers -n 8
//
// Each job body is text. The demo handler understands three kinds of job:
// "sleep:<duration>" works that long (a Go duration: 200ms), then succeeds;
// "fail:<k>" fails on its first k deliveries, then succeeds; anything else
// succeeds at once. A failed job is nacked with exponential backoff (-backoff
// × 2^(delivery-1), capped by -max-backoff); after the group's
// max_deliveries the server dead-letters it.
//
// On SIGTERM (or SIGINT) the worker stops taking new jobs, hands buffered
// ones back to the server, lets the jobs in progress finish and settle (up
// to -grace; a job still running then is cancelled and handed back),
// closes the connection and exits 0.
//
// It prints one line per event on stdout: ready, start <job>,
// done <job> attempt=<n>, retry <job> attempt=<n> delay=<d>, corrupt, stopped.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"
)

func main() {
	url := flag.String("url", "fibril://127.0.0.1:4222", "server URL")
	topic := flag.String("topic", "jobs", "topic to consume")
	group := flag.String("group", "workers", "consumer group")
	n := flag.Int("n", 8, "jobs handled at once")
	credit := flag.Int("max-in-flight", 0, "deliveries held at once, running or buffered (default 2n)")
	base := flag.Duration("backoff", 100*time.Millisecond, "first retry delay")
	maxBackoff := flag.Duration("max-backoff", 30*time.Second, "longest retry delay")
	grace := flag.Duration("grace", 30*time.Second, "how long jobs in progress may run on after SIGTERM")
	flag.Parse()
	if *credit == 0 {
		*credit = 2 * *n
	}
	if err := run(*url, *topic, *group, *n, *credit, *base, *maxBackoff, *grace); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// backoff is the redelivery delay after failed delivery number attempt.
func backoff(attempt int, base, limit time.Duration) time.Duration {
	d := base << (attempt - 1)
	if d > limit || d <= 0 {
		return limit
	}
	return d
}

// process is the demo job handler; it fails by returning an error.
func process(ctx context.Context, body string, attempt int) error {
	kind, arg, _ := strings.Cut(body, ":")
	switch kind {
	case "sleep":
		d, err := time.ParseDuration(arg)
		if err != nil {
			return err
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	case "fail":
		if k, _ := strconv.Atoi(arg); attempt <= k {
			return fmt.Errorf("job %q failed on attempt %d", body, attempt)
		}
	}
	return nil
}

func run(url, topic, group string, n, credit int, base, maxBackoff, grace time.Duration) error {
	stop, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	// Jobs run under their own context: it ends grace after the stop, so a
	// job in progress at SIGTERM may finish.
	jobs, cancelJobs := context.WithCancel(context.WithoutCancel(stop))
	defer cancelJobs()
	go func() {
		<-stop.Done()
		time.AfterFunc(grace, cancelJobs)
	}()

	c, err := fibril.Connect(stop, url, fibril.WithName("example-worker"))
	if err != nil {
		return err
	}
	defer c.Close()
	// A settle made after the stop still has to reach the server.
	settle := context.WithoutCancel(stop)

	handler := func(_ context.Context, m *fibril.Msg) error {
		body, attempt := string(m.Data), m.DeliveryCount()
		fmt.Println("start", body)
		if err := process(jobs, body, attempt); err != nil {
			delay := backoff(attempt, base, maxBackoff)
			if jobs.Err() != nil {
				delay = 0 // cancelled by the grace: hand it back at once
			}
			fmt.Println("retry", body, "attempt="+strconv.Itoa(attempt), "delay="+delay.String())
			return m.Nack(settle, delay)
		}
		fmt.Println("done", body, "attempt="+strconv.Itoa(attempt))
		return nil // Consume acks it (batched, answered before Consume returns)
	}
	onError := func(err error) {
		if errors.Is(err, fibril.ErrCorruptDelivery) {
			fmt.Println("corrupt") // already handed back for redelivery
			return
		}
		fmt.Fprintln(os.Stderr, "worker:", err)
	}
	fmt.Println("ready")
	// Credit of twice the concurrency keeps every handler busy without
	// hoarding jobs other workers could take. Consume returns once stop is
	// done and the handlers running then have returned; the deliveries it
	// still held are handed back.
	err = c.Consume(stop, topic, group, handler,
		fibril.WithConcurrency(n), fibril.WithMaxInFlight(credit), fibril.WithErrorHandler(onError))
	if err != nil {
		return err
	}
	// Drain: the hand-backs are answered before the connection closes.
	dctx, cancelDrain := context.WithTimeout(settle, 2*time.Second)
	defer cancelDrain()
	if err := c.Drain(dctx); err != nil {
		return err
	}
	fmt.Println("stopped")
	return nil
}
