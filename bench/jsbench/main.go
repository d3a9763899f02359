// Command jsbench is the JetStream side-by-side benchmark of issue 28: one
// nats.go jetstream program (async publish with PubAcks, then Consume with
// explicit acks, 1 KiB) against any server speaking the JetStream API
// (fibril serve, nats-server -js). It prints one line of rates and, per
// phase, the CPU time per message of this client process and (with -pid,
// read from /proc) of the server process: what bounds a rate on a machine
// with few cores is whichever process runs out of CPU first.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime/pprof"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	exit := 0
	defer func() { os.Exit(exit) }()
	url := flag.String("url", nats.DefaultURL, "server URL")
	n := flag.Int("n", 100000, "messages")
	size := flag.Int("size", 1024, "payload bytes")
	pid := flag.Int("pid", 0, "server process ID: also report its CPU per message (from /proc)")
	cpuprofile := flag.String("cpuprofile", "", "write this client's CPU profile here")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	if err := run(*url, *n, *size, *pid); err != nil {
		log.Print(err)
		exit = 1
	}
}

// phase is one timed phase with the CPU the two processes spent in it.
type phase struct {
	pid            int
	startW         time.Time
	startC, startS time.Duration
	startSOK       bool

	wall, client, server time.Duration
	serverKnown          bool
}

func begin(pid int) *phase {
	p := &phase{pid: pid, startW: time.Now(), startC: selfCPU()}
	p.startS, p.startSOK = procCPU(pid)
	return p
}

func (p *phase) end() {
	p.wall = time.Since(p.startW)
	p.client = selfCPU() - p.startC
	if s, ok := procCPU(p.pid); ok && p.startSOK {
		p.server, p.serverKnown = s-p.startS, true
	}
}

// line formats a phase of n messages.
func (p *phase) line(name string, n int) string {
	s := fmt.Sprintf("%s %.0f msg/s (client %.2f µs/msg", name, float64(n)/p.wall.Seconds(), perMsg(p.client, n))
	if p.serverKnown {
		s += fmt.Sprintf(", server %.2f µs/msg", perMsg(p.server, n))
	}
	return s + ")"
}

func perMsg(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func run(url string, n, size, pid int) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_ = js.DeleteStream(ctx, "BENCH")
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"bench.>"}, Retention: jetstream.WorkQueuePolicy})
	if err != nil {
		return fmt.Errorf("create stream: %w", err)
	}
	payload := make([]byte, size)
	pub := begin(pid)
	for range n {
		if _, err := js.PublishAsync("bench.x", payload, jetstream.WithStallWait(time.Minute)); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	pub.end()
	c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "bench"})
	if err != nil {
		return fmt.Errorf("create consumer: %w", err)
	}
	var got atomic.Int64
	done := make(chan struct{})
	con := begin(pid)
	cc, err := c.Consume(func(m jetstream.Msg) {
		_ = m.Ack()
		if got.Add(1) == int64(n) {
			close(done)
		}
	})
	if err != nil {
		return err
	}
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("consumed %d of %d: %w", got.Load(), n, ctx.Err())
	}
	con.end()
	cc.Stop()
	fmt.Printf("%s  %s  (%d x %d B)\n", pub.line("publish", n), con.line("consume", n), n, size)
	return nil
}
