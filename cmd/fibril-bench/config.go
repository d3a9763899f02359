package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// Config is one benchmark run. Zero values are filled in by validate.
type Config struct {
	System string // "fibril" or "nats"
	Client string // Fibril: "wire" (protocol package) or "sdk" (the Go SDK)
	Mode   string // "durable" (topic + group / JetStream work queue) or "plain" (core pub/sub)

	URL string // server to use; empty: start one. Several, comma-separated: a cluster's nodes (cluster.go)
	// HTTPURLs are the admin listeners of a Fibril cluster's nodes, in
	// --url's order (the leader is found from their /metrics).
	HTTPURLs string
	// Target is the node a cluster run's clients connect to: leader or
	// follower.
	Target string
	// NatsReplicas is the JetStream stream's (and consumer's) replicas.
	NatsReplicas int
	// clusterAddrs is --url split, host:port each, when it names several nodes.
	clusterAddrs []string
	ServerPID    int    // with URL: read this process's VmHWM
	FibrilBin    string // `fibril` binary started when URL is empty
	NatsBin      string // `nats-server` binary started when URL is empty
	// NatsSyncAlways starts nats-server with jetstream sync_interval: always.
	NatsSyncAlways bool
	// Embed runs the Fibril server inside this process (for profiling).
	Embed bool
	// ServerArgs are extra flags for `fibril serve`.
	ServerArgs []string
	KeepData   bool

	Pubs, Subs int
	Size       int
	Msgs       int64         // total over all publishers (with Duration: ignored)
	Duration   time.Duration // publish for this long instead of Msgs
	Rate       int           // total publish rate limit, msgs/s (0: as fast as possible)
	Warmup     time.Duration // messages sent in this first part of the run stay out of the latency percentiles

	Topic, Group string
	Partitions   int
	Durability   string // sync | group | none (Fibril topic)
	Confirm      bool   // wait for publish confirms (pipelined up to Window)
	Window       int    // unconfirmed publishes per publisher
	CRC          bool   // Fibril: checksum token on every PUB and MSG
	Consume      string // pull | push
	Batch        int    // pull batch (POLL max / JetStream fetch batch)
	PollDepth    int    // POLLs kept outstanding per Fibril wire consumer
	Credit       int    // push credit (SUB max-inflight)
	Ack          string // batch (many handles per ACK line) | each (one ACK per message)
	Backlog      bool   // publish everything first, then start the consumers

	Progress time.Duration // progress line interval on stderr (0: off)
	Timeout  time.Duration // give up (and fail) after this long
	Stall    time.Duration // fail when no delivery arrives for this long
	JSON     bool

	CPUProfile, MemProfile string // with Embed: profiles of the whole process
	Trace                  string // with Embed: a runtime execution trace of the run
	LatencyLog             string // write every first delivery's send time and latency here

	// DiskProbe, when set, measures the disk instead of a server: blocks of
	// DiskProbeBlock bytes written and fdatasynced back to back for this
	// long in DiskProbeDir (diskprobe.go).
	DiskProbe      time.Duration
	DiskProbeDir   string
	DiskProbeBlock int

	// dropNth is a test hook: the consumers ignore the n-th delivery (1-based)
	// as if it never arrived, so the verification must fail.
	dropNth int64
}

func defaultConfig() Config {
	return Config{System: "fibril", Client: "wire", Mode: "durable", FibrilBin: "fibril", NatsBin: "nats-server",
		Pubs: 1, Subs: 1, Size: 1024, Msgs: 100_000, Topic: "bench", Group: "bench",
		Partitions: 1, Durability: "group", Confirm: true, Window: 1024, CRC: true,
		Consume: "pull", Batch: 500, Target: "leader", NatsReplicas: 1, PollDepth: 2, Credit: 1000, Ack: "batch",
		Progress: time.Second, Timeout: 10 * time.Minute, Stall: 20 * time.Second}
}

// errUsage marks a bad flag or combination (exit code 2).
var errUsage = errors.New("usage")

func (c *Config) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
	}
	switch {
	case c.System != "fibril" && c.System != "nats":
		return bad("--system %q: want fibril or nats", c.System)
	case c.Client != "wire" && c.Client != "sdk":
		return bad("--client %q: want wire or sdk", c.Client)
	case c.Client == "sdk" && (c.System != "fibril" || c.Mode != "durable" || c.Consume != "pull"):
		return bad("--client sdk: Fibril durable mode with pull consumers only")
	case c.Mode != "durable" && c.Mode != "plain":
		return bad("--mode %q: want durable or plain", c.Mode)
	case c.Pubs < 1 || c.Pubs > 1<<15:
		return bad("--pubs %d: want 1..32768", c.Pubs)
	case c.Subs < 1 || c.Subs > 4096:
		return bad("--subs %d: want 1..4096", c.Subs)
	case c.Size < minPayload || c.Size > 64<<20:
		return bad("--size %d: want %d..64MiB (the payload carries an id and a timestamp)", c.Size, minPayload)
	case c.Duration == 0 && c.Msgs < int64(c.Pubs):
		return bad("--msgs %d: want at least one per publisher", c.Msgs)
	case c.Duration < 0 || c.Rate < 0 || c.Warmup < 0 || c.Timeout <= 0 || c.Stall <= 0 || c.Progress < 0:
		return bad("negative --duration, --rate, --warmup, --progress or non-positive --timeout or --stall")
	case c.Partitions < 1 || c.Partitions > 4096:
		return bad("--partitions %d: want 1..4096", c.Partitions)
	case c.Durability != "sync" && c.Durability != "group" && c.Durability != "none":
		return bad("--durability %q: want sync, group or none", c.Durability)
	case c.Window < 1:
		return bad("--window %d: want >= 1", c.Window)
	case c.Consume != "pull" && c.Consume != "push":
		return bad("--consume %q: want pull or push", c.Consume)
	case c.Batch < 1 || c.Credit < 1 || c.PollDepth < 1:
		return bad("--batch, --credit and --poll-depth must be >= 1")
	case c.Ack != "batch" && c.Ack != "each":
		return bad("--ack %q: want batch or each", c.Ack)
	case c.Mode == "plain" && c.Backlog:
		return bad("--backlog needs durable mode (plain pub/sub keeps nothing)")
	case c.Embed && (c.System != "fibril" || c.URL != ""):
		return bad("--embed runs a Fibril server in this process: not with --system nats or --url")
	case (c.CPUProfile != "" || c.MemProfile != "" || c.Trace != "") && !c.Embed:
		return bad("--cpuprofile/--memprofile/--trace need --embed (they profile this process)")
	case c.ServerPID != 0 && c.URL == "":
		return bad("--server-pid goes with --url")
	case c.Target != "leader" && c.Target != "follower":
		return bad("--target %q: want leader or follower", c.Target)
	case c.NatsReplicas != 1 && c.NatsReplicas != 3 && c.NatsReplicas != 5:
		return bad("--nats-replicas %d: want 1, 3 or 5", c.NatsReplicas)
	}
	return c.validateCluster()
}

// validateCluster checks the flags of a run against a cluster (--url with
// several nodes) and fills clusterAddrs.
func (c *Config) validateCluster() error {
	urls := splitList(c.URL)
	if len(urls) < 2 {
		c.clusterAddrs = nil
		if c.Target != "leader" || c.HTTPURLs != "" {
			return fmt.Errorf("%w: --target and --http-urls go with a cluster (--url with several nodes)", errUsage)
		}
		return nil
	}
	c.clusterAddrs = c.clusterAddrs[:0]
	for _, u := range urls {
		h, err := hostOf(u)
		if err != nil {
			return err
		}
		c.clusterAddrs = append(c.clusterAddrs, h)
	}
	if c.System == "fibril" && (len(splitList(c.HTTPURLs)) != len(urls) || c.Client != "wire" ||
		c.Partitions != 1 || c.Mode != "durable") {
		return fmt.Errorf("%w: a Fibril cluster run needs --http-urls for every node of --url, --client wire, --partitions 1 and durable mode", errUsage)
	}
	return nil
}

// parseFlags fills a Config from the command line.
func parseFlags(args []string, stderr io.Writer) (Config, error) {
	c := defaultConfig()
	fs := flag.NewFlagSet("fibril-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.System, "system", c.System, "server under test: fibril or nats (JetStream / NATS core via nats.go)")
	fs.StringVar(&c.Client, "client", c.Client, "Fibril client: wire (raw protocol package, pipelined; the default) or sdk (the Go SDK: PublishAsync, a Fetcher with prefetch 2, AckAllAsync per batch)")
	fs.StringVar(&c.Mode, "mode", c.Mode, "durable (Fibril topic+group, JetStream work-queue stream+durable pull consumer) or plain (core pub/sub, nothing stored)")
	fs.StringVar(&c.URL, "url", "", "use this server (nats://host:port) instead of starting one; several, comma-separated: a cluster's nodes, the clients connect to the leader (--target)")
	fs.StringVar(&c.HTTPURLs, "http-urls", "", "with a Fibril cluster --url: the nodes' admin listeners (http://host:port, same order), to find partition 0's leader and read its stages")
	fs.StringVar(&c.Target, "target", c.Target, "with a cluster --url: the clients connect to the leader, or to a follower (Fibril forwards to the leader)")
	fs.IntVar(&c.NatsReplicas, "nats-replicas", c.NatsReplicas, "JetStream stream replicas (3 or 5 on a nats-server cluster given with --url)")
	fs.IntVar(&c.ServerPID, "server-pid", 0, "with --url: PID of the server, to report its peak RSS (VmHWM)")
	fs.StringVar(&c.FibrilBin, "fibril-bin", c.FibrilBin, "fibril binary to start (`fibril serve` on a temp dir, port 0)")
	fs.StringVar(&c.NatsBin, "nats-bin", c.NatsBin, "nats-server binary to start (JetStream, file storage, temp dir)")
	fs.BoolVar(&c.NatsSyncAlways, "nats-sync-always", false, "start nats-server with jetstream sync_interval: always (fsync every write)")
	fs.BoolVar(&c.Embed, "embed", false, "run the Fibril server inside this process (for --cpuprofile; RSS then includes the clients)")
	fs.BoolVar(&c.KeepData, "keep-data", false, "keep the temp data directory of a started server")
	fs.IntVar(&c.Pubs, "pubs", c.Pubs, "publishers (one connection each)")
	fs.IntVar(&c.Subs, "subs", c.Subs, "consumers (one connection each)")
	fs.IntVar(&c.Size, "size", c.Size, "payload bytes (>= 16: id and timestamp)")
	fs.Int64Var(&c.Msgs, "msgs", c.Msgs, "messages in total, split over the publishers")
	fs.DurationVar(&c.Duration, "duration", 0, "publish for this long instead of --msgs")
	fs.DurationVar(&c.Warmup, "warmup", 0, "leave the messages sent in this first part of the run out of the latency percentiles (steady state; they are still verified and counted in the rates)")
	fs.IntVar(&c.Rate, "rate", 0, "total publish rate limit in msgs/s (0: unlimited), for latency at a given load")
	fs.StringVar(&c.Topic, "topic", c.Topic, "topic (Fibril) / subject (NATS; the stream is named BENCH)")
	fs.StringVar(&c.Group, "group", c.Group, "consumer group (Fibril) / durable consumer name (NATS)")
	fs.IntVar(&c.Partitions, "partitions", c.Partitions, "topic partitions (Fibril; NATS streams have none)")
	fs.StringVar(&c.Durability, "durability", c.Durability, "Fibril topic durability: sync (fsync each batch), group (group commit: fsync before confirm, shared), none")
	fs.BoolVar(&c.Confirm, "confirm", c.Confirm, "publish with confirms, pipelined up to --window (false: fire and forget, PING at the end)")
	fs.IntVar(&c.Window, "window", c.Window, "unconfirmed publishes per publisher (Fibril: capped at INFO max_unconfirmed; NATS: PublishAsyncMaxPending)")
	fs.BoolVar(&c.CRC, "crc", c.CRC, "Fibril durable mode: CRC-32 token on every PUB and MSG (checked end to end)")
	fs.StringVar(&c.Consume, "consume", c.Consume, "pull (POLL / JetStream Fetch) or push (SUB with credit; NATS: Consume)")
	fs.IntVar(&c.Batch, "batch", c.Batch, "pull batch size")
	fs.IntVar(&c.PollDepth, "poll-depth", c.PollDepth, "POLLs each Fibril wire consumer keeps outstanding")
	fs.IntVar(&c.Credit, "credit", c.Credit, "push credit (max-inflight of the SUB)")
	fs.StringVar(&c.Ack, "ack", c.Ack, "batch: many handles per ACK line; each: one ACK per message (NATS: always one ack per message)")
	fs.BoolVar(&c.Backlog, "backlog", false, "publish all messages first, then consume (backlog drain)")
	fs.DurationVar(&c.Progress, "progress", c.Progress, "progress line interval on stderr (0: off)")
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "fail the run after this long")
	fs.DurationVar(&c.Stall, "stall", c.Stall, "fail when no message arrives for this long (a lost message shows up as a stall)")
	fs.BoolVar(&c.JSON, "json", false, "print the result as one JSON object on stdout")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "with --embed: write a CPU profile of the run here")
	fs.StringVar(&c.MemProfile, "memprofile", "", "with --embed: write an allocation profile here at the end")
	fs.StringVar(&c.Trace, "trace", "", "with --embed: write a runtime execution trace of the run here (go tool trace; -pprof=sched|sync|syscall)")
	fs.StringVar(&c.LatencyLog, "latency-log", "", "write every first delivery here, sorted by send time, one line each: `<sent unix ns> <latency ns> <consumer>` (to see whether a tail is spread or comes in episodes)")
	fs.DurationVar(&c.DiskProbe, "disk-probe", 0, "measure the disk instead of a server: write and fdatasync blocks back to back for this long (e.g. 5s) and report the fsync latencies and stalls")
	fs.StringVar(&c.DiskProbeDir, "disk-probe-dir", os.TempDir(), "with --disk-probe: directory of the probe's temporary file (where the servers' data goes)")
	fs.IntVar(&c.DiskProbeBlock, "disk-probe-block", 128<<10, "with --disk-probe: bytes written before each fdatasync")
	var serverArgs stringList
	fs.Var(&serverArgs, "server-arg", "extra flag for `fibril serve` (repeatable)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	c.ServerArgs = serverArgs
	return c, c.validate()
}

type stringList []string

func (s *stringList) String() string     { return fmt.Sprint(*s) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

const usageText = `usage: fibril-bench [flags]

Runs N publishers and M consumers against a Fibril server (or nats-server) on
loopback, then prints publish and consume rates, end-to-end latency
percentiles (and publish->confirm: Fibril's wire client, JetStream's publish
ack), the server's peak RSS and a verification that every message
arrived exactly once (exit 1 if not). Starts the server itself on a temp dir
unless --url is given.

Examples:
  fibril-bench --msgs 200000 --size 1024 --durability group
  fibril-bench --pubs 4 --subs 4 --partitions 4 --msgs 400000
  fibril-bench --backlog --msgs 1000000
  fibril-bench --mode plain --msgs 1000000
  fibril-bench --system nats --msgs 200000          # JetStream work queue
  fibril-bench --system nats --mode plain           # NATS core
  fibril-bench --disk-probe 5s                      # the disk's fsync latency and stalls
  fibril-bench --url nats://h:1,nats://h:2,nats://h:3 --http-urls http://h:4,http://h:5,http://h:6
                                                    # a Fibril cluster, clients on the leader (bench/cluster.sh)
  fibril-bench --system nats --url nats://h:1,nats://h:2,nats://h:3 --nats-replicas 3   # JetStream R3

Flags:
`
