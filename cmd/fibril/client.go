package main

// The small client: fibril pub|sub|poll|topics, one Go SDK connection each
// (fibril mode: strict answers, confirms, CRC), no reconnects.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	fibril "github.com/fibrilmq/fibril/sdk"
)

// clientFlags are the connection flags every client command takes.
type clientFlags struct {
	url, token, user, pass string
	timeout                time.Duration
}

func addClientFlags(fs *flag.FlagSet) *clientFlags {
	cf := &clientFlags{}
	def := os.Getenv("FIBRIL_URL")
	if def == "" {
		def = "nats://127.0.0.1:4222"
	}
	fs.StringVar(&cf.url, "s", def, "server URL (env FIBRIL_URL)")
	fs.StringVar(&cf.token, "token", os.Getenv("FIBRIL_TOKEN"), "auth token (env FIBRIL_TOKEN)")
	fs.StringVar(&cf.user, "user", os.Getenv("FIBRIL_USER"), "user name (env FIBRIL_USER)")
	fs.StringVar(&cf.pass, "pass", os.Getenv("FIBRIL_PASS"), "password (env FIBRIL_PASS)")
	fs.DurationVar(&cf.timeout, "timeout", 10*time.Second, "how long to wait for the server")
	return cf
}

// dial connects in fibril mode with CRC on. A lost connection is final:
// these commands report it rather than retry.
func (cf *clientFlags) dial(ctx context.Context) (*fibril.Conn, error) {
	opts := []fibril.Option{fibril.WithName("fibril-cli"), fibril.WithoutReconnect(), fibril.WithDialTimeout(cf.timeout)}
	switch {
	case cf.token != "":
		opts = append(opts, fibril.WithToken(cf.token))
	case cf.user != "":
		opts = append(opts, fibril.WithUserPassword(cf.user, cf.pass))
	}
	c, err := fibril.Connect(ctx, cf.url, opts...)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			// "connection refused", without the address the layers below
			// each repeat.
			cause := oe.Err
			if u := errors.Unwrap(cause); u != nil {
				cause = u
			}
			return nil, fmt.Errorf("cannot connect to %s: %w (is the server running? set -s or FIBRIL_URL)", cf.url, cause)
		}
		return nil, fmt.Errorf("connect to %s: %w", cf.url, err)
	}
	return c, nil
}

// call bounds one request by the -timeout flag.
func (cf *clientFlags) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, cf.timeout)
}

// cmdPub: fibril pub [flags] <subject> <data>
func cmdPub(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("pub", stderr)
	cf := addClientFlags(fs)
	key := fs.String("key", "", "partition key (sent as the Fibril-Key header)")
	plain := fs.Bool("plain", false, "publish to plain subscribers only: no topic need capture the subject")
	msgID := fs.String("msg-id", "", "message id (sent as the Nats-Msg-Id header): stored once within the topic's duplicate window")
	ttl := fs.Duration("ttl", 0, "time to live (sent as the Nats-TTL header; the topic needs allow_msg_ttl), e.g. 30s")
	delay := fs.Duration("delay", 0, "hold the message back this long (sent as the Fibril-Delay header; the topic needs allow_msg_delay), e.g. 10m")
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	if *ttl < 0 || *delay < 0 {
		return badArgs(stderr, "pub")
	}
	if fs.NArg() != 2 {
		return badArgs(stderr, "pub")
	}
	ctx := context.Background()
	c, err := cf.dial(ctx)
	if err != nil {
		return fail(stderr, "pub", err)
	}
	defer c.Close()
	var opts []fibril.PubOption
	if *key != "" {
		opts = append(opts, fibril.WithKey(*key))
	}
	if *msgID != "" {
		opts = append(opts, fibril.WithMsgID(*msgID))
	}
	if *ttl > 0 {
		opts = append(opts, fibril.WithTTL(*ttl))
	}
	if *delay > 0 {
		opts = append(opts, fibril.WithDelay(*delay))
	}
	cctx, cancel := cf.call(ctx)
	defer cancel()
	pos, err := c.Publish(cctx, fs.Arg(0), []byte(fs.Arg(1)), opts...)
	switch {
	case err != nil:
		return fail(stderr, "pub", err)
	case pos.Duplicate:
		fmt.Fprintf(stdout, "duplicate: message id %q is stored in partition %d at seq %d\n", *msgID, pos.Partition, pos.Seq)
	case pos.Stored:
		fmt.Fprintf(stdout, "stored in partition %d at seq %d\n", pos.Partition, pos.Seq)
	case *plain:
		fmt.Fprintln(stdout, "published (no durable topic captured it)")
	default:
		// A mistyped topic name must not look like success (SPEC.md 7.4).
		fmt.Fprintf(stderr, "fibril pub: no topic captures %q: nothing stored (create one with `fibril topics create`, or pass -plain to publish to plain subscribers only)\n", fs.Arg(0))
		return 1
	}
	return 0
}

// printMsg prints one delivery: subject, ack handle, headers, data.
func printMsg(w io.Writer, m *fibril.Msg) {
	fmt.Fprintf(w, "[%s]", m.Subject)
	if h := m.Handle(); h != "" {
		fmt.Fprintf(w, " reply=%s", h)
	}
	if len(m.Header) > 0 {
		keys := make([]string, 0, len(m.Header))
		for k := range m.Header {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var b strings.Builder
		for _, k := range keys {
			for _, v := range m.Header[k] {
				fmt.Fprintf(&b, "%s: %s\r\n", k, v)
			}
		}
		fmt.Fprintf(w, " headers=%q", b.String())
	}
	fmt.Fprintf(w, " %s\n", m.Data)
}

// cmdSub: fibril sub [flags] <subject>; durable deliveries are acked.
func cmdSub(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sub", stderr)
	cf := addClientFlags(fs)
	group := fs.String("q", "", "queue group, or durable group when the subject names a topic")
	count := fs.Int("n", 0, "exit after this many messages (0: run until interrupted)")
	noAck := fs.Bool("no-ack", false, "do not ACK durable deliveries")
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return badArgs(stderr, "sub")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := cf.dial(ctx)
	if err != nil {
		return fail(stderr, "sub", err)
	}
	defer c.Close()
	cctx, cancel := cf.call(ctx)
	var sub *fibril.Subscription
	if *group != "" {
		sub, err = c.Subscribe(cctx, fs.Arg(0), *group)
	} else {
		sub, err = c.SubscribeSubject(cctx, fs.Arg(0))
	}
	cancel()
	if err != nil {
		return fail(stderr, "sub", err)
	}
	for got := 0; *count == 0 || got < *count; got++ {
		m, err := sub.Next(ctx)
		if err != nil {
			if ctx.Err() != nil { // interrupted: a normal end
				return 0
			}
			return fail(stderr, "sub", err)
		}
		printMsg(stdout, m)
		if m.Handle() != "" && !*noAck {
			actx, cancel := cf.call(ctx)
			err := m.Ack(actx)
			cancel()
			if err != nil {
				return fail(stderr, "sub", err)
			}
		}
	}
	return 0
}

// cmdPoll: fibril poll [flags] <topic> <group>
func cmdPoll(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("poll", stderr)
	cf := addClientFlags(fs)
	max := fs.Int("n", 10, "most messages to fetch")
	wait := fs.Int64("wait", 0, "milliseconds to wait for the first message")
	ack := fs.Bool("ack", false, "ACK what was fetched")
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 2 {
		return badArgs(stderr, "poll")
	}
	ctx := context.Background()
	c, err := cf.dial(ctx)
	if err != nil {
		return fail(stderr, "poll", err)
	}
	defer c.Close()
	waitFor := time.Duration(*wait) * time.Millisecond
	cctx, cancel := context.WithTimeout(ctx, cf.timeout+waitFor)
	defer cancel()
	msgs, err := c.Fetch(cctx, fs.Arg(0), fs.Arg(1), *max, waitFor)
	for _, m := range msgs {
		printMsg(stdout, m)
	}
	if err != nil {
		return fail(stderr, "poll", err)
	}
	fmt.Fprintf(stdout, "%d message(s)\n", len(msgs))
	if *ack && len(msgs) > 0 {
		actx, cancel := cf.call(ctx)
		defer cancel()
		if err := c.AckAll(actx, msgs...); err != nil {
			return fail(stderr, "poll", err)
		}
		fmt.Fprintln(stdout, "acked")
	}
	return 0
}

// cmdTopics: fibril topics [list | create <name> [json] | info <name> | delete <name>]
func cmdTopics(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("topics", stderr)
	cf := addClientFlags(fs)
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	rest := fs.Args()
	if len(rest) == 0 {
		rest = []string{"list"}
	}
	var cfg fibril.TopicConfig
	var sel fibril.RequeueOptions
	switch {
	case rest[0] == "list" && len(rest) == 1:
	case rest[0] == "create" && (len(rest) == 2 || len(rest) == 3):
		if len(rest) == 3 {
			// The server's own check (invalid_json), before dialling.
			if err := protocol.DecodeStrict([]byte(rest[2]), &cfg); err != nil {
				return fail(stderr, "topics", err)
			}
		}
	case (rest[0] == "info" || rest[0] == "delete") && len(rest) == 2:
	case rest[0] == "requeue" && (len(rest) == 2 || len(rest) == 3):
		if len(rest) == 3 {
			if err := protocol.DecodeStrict([]byte(rest[2]), &sel); err != nil {
				return fail(stderr, "topics", err)
			}
		}
	default:
		return badArgs(stderr, "topics")
	}
	return manageCall(cf, "topics", stdout, stderr, func(ctx context.Context, c *fibril.Conn) (out any, err error) {
		switch rest[0] {
		case "list":
			var l protocol.TopicList
			l.Topics, err = c.Topics(ctx)
			if l.Topics == nil {
				l.Topics = []string{}
			}
			return l, err
		case "create":
			return c.CreateTopic(ctx, rest[1], cfg)
		case "info":
			return c.Topic(ctx, rest[1])
		case "delete":
			return protocol.Deleted{Topic: rest[1]}, c.DeleteTopic(ctx, rest[1])
		}
		return c.Requeue(ctx, rest[1], sel)
	})
}

// manageCall dials, runs one management call under the request timeout
// and prints its answer as indented JSON, or the error as `fibril <cmd>:`.
func manageCall(cf *clientFlags, cmd string, stdout, stderr io.Writer, call func(context.Context, *fibril.Conn) (any, error)) int {
	ctx := context.Background()
	c, err := cf.dial(ctx)
	if err != nil {
		return fail(stderr, cmd, err)
	}
	defer c.Close()
	cctx, cancel := cf.call(ctx)
	defer cancel()
	out, err := call(cctx, c)
	if err != nil {
		return fail(stderr, cmd, err)
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fail(stderr, cmd, fmt.Errorf("encoding the answer: %w", err))
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return 0
}

func cmdGroups(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("groups", stderr)
	cf := addClientFlags(fs)
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	rest := fs.Args()
	var cfg fibril.GroupConfig
	switch {
	case len(rest) == 2 && rest[0] == "list":
	case len(rest) == 3 && (rest[0] == "info" || rest[0] == "delete"):
	case (len(rest) == 3 || len(rest) == 4) && rest[0] == "create":
		if len(rest) == 4 {
			// The server's own check (invalid_json), before dialling.
			if err := protocol.DecodeStrict([]byte(rest[3]), &cfg); err != nil {
				return fail(stderr, "groups", err)
			}
		}
	default:
		return badArgs(stderr, "groups")
	}
	return manageCall(cf, "groups", stdout, stderr, func(ctx context.Context, c *fibril.Conn) (out any, err error) {
		switch rest[0] {
		case "list":
			l := protocol.GroupList{Topic: rest[1]}
			l.Groups, err = c.Groups(ctx, rest[1])
			if l.Groups == nil {
				l.Groups = []string{}
			}
			return l, err
		case "create":
			return c.CreateGroup(ctx, rest[1], rest[2], cfg)
		case "info":
			return c.Group(ctx, rest[1], rest[2])
		}
		return protocol.Deleted{Topic: rest[1], Group: rest[2]}, c.DeleteGroup(ctx, rest[1], rest[2])
	})
}
