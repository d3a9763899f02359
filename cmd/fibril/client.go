package main

// The small client: fibril pub|sub|poll|topics, speaking the protocol
// package over one TCP connection in Fibril mode (strict answers).

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

// conn is one Fibril-mode connection.
type conn struct {
	nc   net.Conn
	p    *protocol.Parser
	buf  []byte
	cmds []protocol.Command
}

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

// dial connects, reads INFO and sends CONNECT {"fibril":1,"crc":true}.
func (cf *clientFlags) dial() (*conn, error) {
	addr := strings.TrimPrefix(strings.TrimPrefix(cf.url, "nats://"), "tcp://")
	nc, err := net.DialTimeout("tcp", addr, cf.timeout)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", addr, err)
	}
	c := &conn{nc: nc, p: protocol.NewParser(protocol.ServerToClient, protocol.Limits{})}
	f, err := c.next(cf.timeout)
	if err != nil || f.Op != protocol.OpInfo {
		nc.Close()
		return nil, fmt.Errorf("connect %s: no INFO: %v", addr, err)
	}
	info, err := protocol.ParseInfo(f.JSON)
	if err != nil {
		nc.Close()
		return nil, err
	}
	c.p.SetLimits(protocol.Limits{MaxPayload: int(info.MaxPayload)})
	cn := protocol.Connect{Fibril: 1, CRC: true, Headers: true, Name: "fibril-cli",
		AuthToken: cf.token, User: cf.user, Pass: cf.pass}
	line, err := protocol.AppendConnect(nil, &cn)
	if err != nil {
		nc.Close()
		return nil, err
	}
	if _, err := nc.Write(line); err != nil {
		nc.Close()
		return nil, err
	}
	c.p.SetCRC(true)
	if _, err := c.answer(cf.timeout); err != nil {
		nc.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	return c, nil
}

func (c *conn) close() { c.nc.Close() }

func (c *conn) send(b []byte) error {
	_, err := c.nc.Write(b)
	return err
}

// next returns the next frame (copied), waiting at most d (0: forever).
func (c *conn) next(d time.Duration) (protocol.Command, error) {
	for len(c.cmds) == 0 {
		n, err := c.p.Parse(c.buf, protocol.HandlerFunc(func(cmd *protocol.Command) error {
			cp := *cmd
			cp.Subject = clone(cmd.Subject)
			cp.Reply = clone(cmd.Reply)
			cp.Sid = clone(cmd.Sid)
			cp.Header = clone(cmd.Header)
			cp.Payload = clone(cmd.Payload)
			cp.Text = clone(cmd.Text)
			cp.JSON = clone(cmd.JSON)
			c.cmds = append(c.cmds, cp)
			return nil
		}))
		c.buf = c.buf[n:]
		if err != nil {
			return protocol.Command{}, err
		}
		if len(c.cmds) > 0 {
			break
		}
		if d > 0 {
			_ = c.nc.SetReadDeadline(time.Now().Add(d))
		}
		tmp := make([]byte, 64<<10)
		m, err := c.nc.Read(tmp)
		c.buf = append(c.buf, tmp[:m]...)
		if err != nil && m == 0 {
			return protocol.Command{}, err
		}
	}
	f := c.cmds[0]
	c.cmds = c.cmds[1:]
	if f.Op == protocol.OpPing {
		_ = c.send([]byte("PONG\r\n"))
		return c.next(d)
	}
	return f, nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

// answer returns the next +OK text, or the -ERR as an error. Push
// deliveries (sid other than 0) are not expected by the commands using it.
func (c *conn) answer(d time.Duration) ([]byte, error) {
	f, err := c.next(d)
	if err != nil {
		return nil, err
	}
	switch f.Op {
	case protocol.OpOK:
		return f.Text, nil
	case protocol.OpErr:
		return nil, protocol.ParseErrText(f.Text)
	}
	return nil, fmt.Errorf("unexpected %s from server", f.Op)
}

func fail(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "fibril %s: %v\n", cmd, err)
	return 1
}

// cmdPub: fibril pub [flags] <subject> <data>
func cmdPub(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fibril pub", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	key := fs.String("key", "", "partition key (sent as the Fibril-Key header)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 2 {
		fmt.Fprintln(stderr, "usage: fibril pub [flags] <subject> <data>")
		return 2
	}
	c, err := cf.dial()
	if err != nil {
		return fail(stderr, "pub", err)
	}
	defer c.close()
	data := []byte(fs.Arg(1))
	var frame []byte
	if *key != "" {
		hdr := protocol.AppendHeader(nil, "Fibril-Key", *key)
		frame = protocol.AppendHPub(nil, fs.Arg(0), "", hdr, data, protocol.ComputeCRC)
	} else {
		frame = protocol.AppendPub(nil, fs.Arg(0), "", data, protocol.ComputeCRC)
	}
	if err := c.send(frame); err != nil {
		return fail(stderr, "pub", err)
	}
	text, err := c.answer(cf.timeout)
	if err != nil {
		return fail(stderr, "pub", err)
	}
	pos, stored, err := protocol.ParseConfirm(text)
	switch {
	case err != nil:
		return fail(stderr, "pub", err)
	case stored:
		fmt.Fprintf(stdout, "stored in partition %d at seq %d\n", pos.Partition, pos.Seq)
	default:
		fmt.Fprintln(stdout, "published (no durable topic captured it)")
	}
	return 0
}

// printMsg prints one delivery.
func printMsg(w io.Writer, f *protocol.Command) {
	fmt.Fprintf(w, "[%s]", f.Subject)
	if len(f.Reply) > 0 {
		fmt.Fprintf(w, " reply=%s", f.Reply)
	}
	if len(f.Header) > 0 {
		fmt.Fprintf(w, " headers=%q", f.Header)
	}
	fmt.Fprintf(w, " %s\n", f.Payload)
}

// cmdSub: fibril sub [flags] <subject>; durable deliveries are acked.
func cmdSub(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fibril sub", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	group := fs.String("q", "", "queue group, or durable group when the subject names a topic")
	count := fs.Int("n", 0, "exit after this many messages (0: run until interrupted)")
	noAck := fs.Bool("no-ack", false, "do not ACK durable deliveries")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: fibril sub [flags] <subject>")
		return 2
	}
	c, err := cf.dial()
	if err != nil {
		return fail(stderr, "sub", err)
	}
	defer c.close()
	if err := c.send(protocol.AppendSub(nil, fs.Arg(0), *group, "1", 0)); err != nil {
		return fail(stderr, "sub", err)
	}
	got := 0
	for *count == 0 || got < *count {
		f, err := c.next(0)
		if err != nil {
			return fail(stderr, "sub", err)
		}
		switch f.Op {
		case protocol.OpMsg, protocol.OpHMsg:
			printMsg(stdout, &f)
			got++
			if h, err := protocol.ParseHandle(f.Reply); err == nil && !*noAck {
				if err := c.send(protocol.AppendAck(nil, h)); err != nil {
					return fail(stderr, "sub", err)
				}
			}
		case protocol.OpErr:
			return fail(stderr, "sub", protocol.ParseErrText(f.Text))
		}
	}
	return 0
}

// cmdPoll: fibril poll [flags] <topic> <group>
func cmdPoll(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fibril poll", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	max := fs.Int("n", 10, "most messages to fetch")
	wait := fs.Int64("wait", 0, "milliseconds to wait for the first message")
	ack := fs.Bool("ack", false, "ACK what was fetched")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 2 {
		fmt.Fprintln(stderr, "usage: fibril poll [flags] <topic> <group>")
		return 2
	}
	c, err := cf.dial()
	if err != nil {
		return fail(stderr, "poll", err)
	}
	defer c.close()
	if err := c.send(protocol.AppendPoll(nil, fs.Arg(0), fs.Arg(1), *max, *wait)); err != nil {
		return fail(stderr, "poll", err)
	}
	var handles []protocol.Handle
	for {
		f, err := c.next(cf.timeout + time.Duration(*wait)*time.Millisecond)
		if err != nil {
			return fail(stderr, "poll", err)
		}
		if f.Op == protocol.OpErr {
			return fail(stderr, "poll", protocol.ParseErrText(f.Text))
		}
		if f.Op == protocol.OpOK {
			break
		}
		printMsg(stdout, &f)
		if h, err := protocol.ParseHandle(f.Reply); err == nil {
			handles = append(handles, h)
		}
	}
	fmt.Fprintf(stdout, "%d message(s)\n", len(handles))
	if *ack && len(handles) > 0 {
		for len(handles) > 0 {
			k := min(len(handles), 64)
			if err := c.send(protocol.AppendAck(nil, handles[:k]...)); err != nil {
				return fail(stderr, "poll", err)
			}
			if _, err := c.answer(cf.timeout); err != nil {
				return fail(stderr, "poll", err)
			}
			handles = handles[k:]
		}
		fmt.Fprintln(stdout, "acked")
	}
	return 0
}

// cmdTopics: fibril topics [list | create <name> [json] | info <name> | delete <name>]
func cmdTopics(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fibril topics", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rest := fs.Args()
	if len(rest) == 0 {
		rest = []string{"list"}
	}
	var line []byte
	switch {
	case rest[0] == "list" && len(rest) == 1:
		line = protocol.AppendTopicList(nil)
	case rest[0] == "create" && (len(rest) == 2 || len(rest) == 3):
		var js []byte
		if len(rest) == 3 {
			js = []byte(rest[2])
		}
		line = protocol.AppendTopicCreate(nil, rest[1], js)
	case rest[0] == "info" && len(rest) == 2:
		line = protocol.AppendTopicInfo(nil, rest[1])
	case rest[0] == "delete" && len(rest) == 2:
		line = protocol.AppendTopicDelete(nil, rest[1])
	default:
		fmt.Fprintln(stderr, "usage: fibril topics [list | create <name> [json] | info <name> | delete <name>]")
		return 2
	}
	c, err := cf.dial()
	if err != nil {
		return fail(stderr, "topics", err)
	}
	defer c.close()
	if err := c.send(line); err != nil {
		return fail(stderr, "topics", err)
	}
	text, err := c.answer(cf.timeout)
	if err != nil {
		return fail(stderr, "topics", err)
	}
	var v any
	if err := json.Unmarshal(text, &v); err != nil {
		return fail(stderr, "topics", errors.New("answer is not JSON: "+string(text)))
	}
	out, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintf(stdout, "%s\n", out)
	return 0
}
