package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

// Env is the server a scenario runs against.
type Env struct {
	Addr string
	// Info is the server's INFO, read once.
	Info map[string]any
	// Restart restarts the server on the same address and data directory;
	// nil when the runner does not manage the server (then scenarios that
	// require "restart" are skipped).
	Restart func(ctx context.Context) error
	// Nodes are a cluster's client addresses in node order (nil on a
	// single server); a client connection is given all of them, so it
	// talks to node 0 first (SPEC.md 11.1). Addr is Nodes[0].
	Nodes []string
	// KillNode sends cluster node i SIGKILL; RestartNode starts it again on
	// its address and data directory.
	KillNode, RestartNode func(ctx context.Context, i int) error
	// Cluster starts a fresh cluster of n nodes for one cluster scenario
	// and returns its Env and how to stop it; nil when the runner cannot.
	Cluster func(ctx context.Context, n int) (*Env, func(), error)
}

// Missing returns the features sc requires that env does not offer.
func (e *Env) Missing(sc *Scenario) []string {
	var miss []string
	for _, f := range sc.Requires {
		if !e.has(f) {
			miss = append(miss, f)
		}
	}
	return miss
}

func (e *Env) has(f string) bool {
	switch f {
	case "restart":
		return e.Restart != nil
	case "fibril":
		v, _ := e.Info["fibril"].(float64)
		return v >= 1
	}
	if v, ok := e.Info[f].(bool); ok {
		return v
	}
	if fs, ok := e.Info["features"].([]any); ok {
		return slices.Contains(fs, any(f))
	}
	return false
}

// StepError says which step of which scenario failed and why.
type StepError struct {
	Step int
	Op   string
	Err  error
}

// Error implements error.
func (e *StepError) Error() string { return fmt.Sprintf("step %d (%s): %v", e.Step, e.Op, e.Err) }

// Unwrap returns the step's cause.
func (e *StepError) Unwrap() error { return e.Err }

// Run executes sc with drv against env. prefix makes its topic names unique
// (it becomes ${T}). It returns nil when every step met its expectation.
func Run(ctx context.Context, sc *Scenario, drv Driver, env *Env, prefix string) error {
	r := &run{
		env: env, drv: drv,
		sessions: map[string]Session{}, raws: map[string]*rawConn{},
		subs: map[string]Subscription{}, subConn: map[string]Session{}, saved: map[string][]*Delivery{},
		vars: map[string]string{"T": prefix},
	}
	mp := intField(env.Info, "max_payload", 1<<20)
	r.vars["max_payload"] = strconv.Itoa(mp)
	r.vars["max_payload_plus1"] = strconv.Itoa(mp + 1)
	defer r.cleanup()
	for i := range sc.Steps {
		st := &sc.Steps[i]
		if err := r.step(ctx, st); err != nil {
			return &StepError{Step: i + 1, Op: st.Op, Err: err}
		}
	}
	return nil
}

type run struct {
	env      *Env
	drv      Driver
	sessions map[string]Session
	raws     map[string]*rawConn
	subs     map[string]Subscription
	subConn  map[string]Session
	saved    map[string][]*Delivery
	vars     map[string]string
}

func (r *run) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, s := range r.subs {
		_ = s.Stop(ctx)
	}
	for _, s := range r.sessions {
		_ = s.Close()
	}
	for _, c := range r.raws {
		_ = c.close()
	}
}

var varRE = regexp.MustCompile(`\$\{([A-Za-z0-9_.]+)\}`)

// x expands ${name} from the run's variables.
func (r *run) x(s string) string {
	return varRE.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := r.vars[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

func connName(st *Step) string {
	if st.Conn == "" {
		return "a"
	}
	return st.Conn
}

func (r *run) session(st *Step) (Session, error) {
	s, ok := r.sessions[connName(st)]
	if !ok {
		return nil, fmt.Errorf("no connection %q (connect it first)", connName(st))
	}
	return s, nil
}

// codeOf returns the error table code carried by err, or "".
func codeOf(err error) string {
	var we *wireError
	if errors.As(err, &we) {
		return we.Code
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return string(pe.Code)
	}
	return ""
}

// outcome compares an op's error with the step's "error" expectation. It
// returns done=true when the step is finished (an expected error happened).
func outcome(st *Step, err error) (done bool, _ error) {
	switch {
	case st.Error == "" && err != nil:
		return true, fmt.Errorf("unexpected error: %w", err)
	case st.Error != "" && err == nil:
		return true, fmt.Errorf("expected error %q, got success", st.Error)
	case st.Error != "":
		if c := codeOf(err); c != st.Error {
			return true, fmt.Errorf("expected error %q, got %q (%v)", st.Error, c, err)
		}
		return true, nil
	}
	return false, nil
}

func (r *run) step(ctx context.Context, st *Step) error {
	timeout := 10 * time.Second
	if st.Op == "restart_server" {
		timeout = 60 * time.Second // recovery of every topic on the server
	}
	if st.TimeoutMS > 0 {
		timeout = time.Duration(st.TimeoutMS) * time.Millisecond
	}
	if st.WaitMS != nil {
		timeout += time.Duration(*st.WaitMS) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch st.Op {
	case "connect":
		crc := st.CRC == nil || *st.CRC
		s, err := r.drv.Open(ctx, r.env.Addr, SessionOptions{CRC: crc, Servers: r.env.Nodes})
		if done, err2 := outcome(st, err); done {
			return err2
		}
		r.sessions[connName(st)] = s
		return nil
	case "close":
		if s, ok := r.sessions[connName(st)]; ok {
			delete(r.sessions, connName(st))
			return s.Close()
		}
		if c, ok := r.raws[connName(st)]; ok {
			delete(r.raws, connName(st))
			return c.close()
		}
		return fmt.Errorf("no connection %q", connName(st))
	case "restart_server":
		if r.env.Restart == nil {
			return errors.New("this runner cannot restart the server")
		}
		if err := r.env.Restart(ctx); err != nil {
			return fmt.Errorf("restart: %w", err)
		}
		for name, c := range r.raws {
			c.close()
			delete(r.raws, name)
		}
		for name, s := range r.sessions {
			if err := s.Restarted(ctx); err != nil {
				return fmt.Errorf("session %s after restart: %w", name, err)
			}
		}
		return nil
	case "kill_node", "restart_node":
		f := r.env.KillNode
		if st.Op == "restart_node" {
			f = r.env.RestartNode
		}
		if f == nil {
			return fmt.Errorf("%s: this runner's server is no cluster", st.Op)
		}
		node := 0
		if st.Node != nil {
			node = *st.Node
		}
		if err := f(ctx, node); err != nil {
			return fmt.Errorf("%s %d: %w", st.Op, node, err)
		}
		return nil
	case "topic_create", "topic_info", "topic_list", "topic_delete", "topic_requeue",
		"group_create", "group_info", "group_list", "group_delete":
		return r.admin(ctx, st)
	case "publish":
		return r.publish(ctx, st)
	case "publish_many":
		return r.publishMany(ctx, st)
	case "poll":
		return r.poll(ctx, st)
	case "ack", "nack", "reject", "extend":
		return r.settle(ctx, st)
	case "subscribe":
		s, err := r.session(st)
		if err != nil {
			return err
		}
		sub, err := s.Subscribe(ctx, r.x(st.Topic), r.x(st.Group), st.MaxInflight)
		if done, err2 := outcome(st, err); done {
			return err2
		}
		r.subs[st.Sub] = sub
		r.subConn[st.Sub] = s
		return nil
	case "unsubscribe":
		sub, ok := r.subs[st.Sub]
		if !ok {
			return fmt.Errorf("no subscription %q", st.Sub)
		}
		delete(r.subs, st.Sub)
		return sub.Stop(ctx)
	case "receive", "receive_all":
		return r.receive(ctx, st)
	case "expect_quiet":
		return r.quiet(ctx, st)
	case "raw_connect":
		return r.rawConnect(ctx, st)
	case "raw_send":
		c, ok := r.raws[connName(st)]
		if !ok {
			return fmt.Errorf("no raw connection %q", connName(st))
		}
		return c.write([]byte(r.x(st.Text)))
	case "raw_expect":
		return r.rawExpect(ctx, st)
	case "raw_expect_closed":
		c, ok := r.raws[connName(st)]
		if !ok {
			return fmt.Errorf("no raw connection %q", connName(st))
		}
		return c.waitClosed(deadline(ctx))
	}
	return fmt.Errorf("unknown op %q", st.Op)
}

func (r *run) admin(ctx context.Context, st *Step) error {
	s, err := r.session(st)
	if err != nil {
		return err
	}
	verb, sub, _ := strings.Cut(strings.ToUpper(st.Op), "_")
	words := []string{verb, sub}
	switch sub {
	case "CREATE", "INFO", "DELETE", "REQUEUE":
		words = append(words, r.x(st.Topic))
		if verb == "GROUP" {
			words = append(words, r.x(st.Group))
		}
	case "LIST":
		if verb == "GROUP" {
			words = append(words, r.x(st.Topic))
		}
	}
	var arg json.RawMessage
	if len(st.Config) > 0 {
		arg = json.RawMessage(r.x(string(st.Config)))
	}
	ans, err := s.Admin(ctx, words, arg)
	if done, err2 := outcome(st, err); done {
		return err2
	}
	if st.Expect == nil {
		return nil
	}
	if len(st.Expect.Fields) > 0 {
		if err := matchFields(ans, st.Expect.Fields, r.x); err != nil {
			return err
		}
	}
	if len(st.Expect.Names) > 0 || len(st.Expect.AbsentNames) > 0 {
		names := listNames(ans)
		for _, n := range st.Expect.Names {
			if !slices.Contains(names, r.x(n)) {
				return fmt.Errorf("list %v lacks %q", names, r.x(n))
			}
		}
		for _, n := range st.Expect.AbsentNames {
			if slices.Contains(names, r.x(n)) {
				return fmt.Errorf("list %v has %q", names, r.x(n))
			}
		}
	}
	return nil
}

// payload returns the data of a publish step.
func (r *run) payload(st *Step) ([]byte, error) {
	if len(st.DataSize) > 0 {
		n, err := r.size(st.DataSize)
		if err != nil {
			return nil, err
		}
		return Fill(n), nil
	}
	if st.Data != nil {
		return []byte(r.x(*st.Data)), nil
	}
	return nil, nil
}

// Fill returns n bytes of the pattern scenarios use for sized payloads:
// byte i is 'a' + i%26.
func Fill(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

// size evaluates a data_size: a number, or "max_payload", "max_payload+N",
// "max_payload-N".
func (r *run) size(raw json.RawMessage) (int, error) {
	var n int
	if json.Unmarshal(raw, &n) == nil {
		return n, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("data_size %s: %w", raw, err)
	}
	mp := intField(r.env.Info, "max_payload", 1<<20)
	rest, ok := strings.CutPrefix(s, "max_payload")
	if !ok {
		return 0, fmt.Errorf("data_size %q", s)
	}
	if rest == "" {
		return mp, nil
	}
	d, err := strconv.Atoi(rest)
	if err != nil {
		return 0, fmt.Errorf("data_size %q", s)
	}
	return mp + d, nil
}

func (r *run) outMsg(st *Step) (OutMsg, error) {
	data, err := r.payload(st)
	if err != nil {
		return OutMsg{}, err
	}
	m := OutMsg{Subject: r.x(st.Subject), Data: data, Key: r.x(st.Key), MsgID: r.x(st.MsgID)}
	if len(st.Headers) > 0 {
		m.Header = map[string]string{}
		for k, v := range st.Headers {
			m.Header[k] = r.x(v)
		}
	}
	return m, nil
}

func (r *run) publish(ctx context.Context, st *Step) error {
	s, err := r.session(st)
	if err != nil {
		return err
	}
	m, err := r.outMsg(st)
	if err != nil {
		return err
	}
	p, err := s.Publish(ctx, m)
	if done, err2 := outcome(st, err); done {
		return err2
	}
	if err := checkPosition(st.Expect, p); err != nil {
		return err
	}
	if st.Save != "" {
		r.vars[st.Save+".partition"] = strconv.Itoa(p.Partition)
		r.vars[st.Save+".seq"] = strconv.FormatUint(p.Seq, 10)
	}
	return nil
}

func checkPosition(e *Expect, p Position) error {
	if e == nil {
		return nil
	}
	if e.Stored != nil && p.Stored != *e.Stored {
		return fmt.Errorf("stored = %v, want %v", p.Stored, *e.Stored)
	}
	if e.Partition != nil && p.Partition != *e.Partition {
		return fmt.Errorf("partition = %d, want %d", p.Partition, *e.Partition)
	}
	if e.Duplicate != nil && p.Duplicate != *e.Duplicate {
		return fmt.Errorf("duplicate = %v, want %v", p.Duplicate, *e.Duplicate)
	}
	return nil
}

// publishMany publishes count messages; message i has key keys[i%len] and
// data "<key or data>:<i>".
func (r *run) publishMany(ctx context.Context, st *Step) error {
	s, err := r.session(st)
	if err != nil {
		return err
	}
	prefix := "m"
	if st.Data != nil {
		prefix = r.x(*st.Data)
	}
	msgs := make([]OutMsg, st.Count)
	for i := range msgs {
		m, err := r.outMsg(st)
		if err != nil {
			return err
		}
		p := prefix
		if len(st.Keys) > 0 {
			m.Key = r.x(st.Keys[i%len(st.Keys)])
			p = m.Key
		}
		m.Data = []byte(p + ":" + strconv.Itoa(i))
		msgs[i] = m
	}
	pos, errs := s.PublishMany(ctx, msgs)
	for i := range msgs {
		if done, err := outcome(st, errs[i]); done {
			if err != nil {
				return fmt.Errorf("message %d: %w", i, err)
			}
			continue
		}
		if err := checkPosition(st.Expect, pos[i]); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
	}
	return nil
}

func (r *run) poll(ctx context.Context, st *Step) error {
	s, err := r.session(st)
	if err != nil {
		return err
	}
	wait := time.Duration(0)
	if st.WaitMS != nil {
		wait = time.Duration(*st.WaitMS) * time.Millisecond
	}
	max := st.Max
	if max == 0 {
		max = 1
	}
	start := time.Now()
	ds, err := s.Poll(ctx, r.x(st.Topic), r.x(st.Group), max, wait)
	// "total": a server may answer a POLL with fewer than max (SPEC.md 8.1),
	// so poll again until total deliveries arrived or one POLL is empty
	for err == nil && st.Total > 0 && len(ds) < st.Total {
		more, perr := s.Poll(ctx, r.x(st.Topic), r.x(st.Group), max, wait)
		ds, err = append(ds, more...), perr
		if len(more) == 0 {
			break
		}
	}
	elapsed := time.Since(start)
	if done, err2 := outcome(st, err); done {
		return err2
	}
	if st.Save != "" {
		r.saved[st.Save] = ds
	}
	if err := r.checkDeliveries(st.Expect, ds); err != nil {
		return err
	}
	if e := st.Expect; e != nil {
		if e.MinElapsedMS > 0 && elapsed < time.Duration(e.MinElapsedMS)*time.Millisecond {
			return fmt.Errorf("answered after %v, want at least %d ms", elapsed, e.MinElapsedMS)
		}
		if e.MaxElapsedMS > 0 && elapsed > time.Duration(e.MaxElapsedMS)*time.Millisecond {
			return fmt.Errorf("answered after %v, want at most %d ms", elapsed, e.MaxElapsedMS)
		}
	}
	return nil
}

var refRE = regexp.MustCompile(`^([A-Za-z0-9_]+)(?:\[(\*|-?[0-9]+)\])?$`)

// deliveries resolves "name", "name[*]" (all) or "name[i]" (negative from
// the end).
func (r *run) deliveries(ref string) ([]*Delivery, error) {
	m := refRE.FindStringSubmatch(ref)
	if m == nil {
		return nil, fmt.Errorf("bad message reference %q", ref)
	}
	ds, ok := r.saved[m[1]]
	if !ok {
		return nil, fmt.Errorf("no saved messages %q", m[1])
	}
	if m[2] == "" || m[2] == "*" {
		return ds, nil
	}
	i, _ := strconv.Atoi(m[2])
	if i < 0 {
		i += len(ds)
	}
	if i < 0 || i >= len(ds) {
		return nil, fmt.Errorf("%q: only %d messages saved", ref, len(ds))
	}
	return ds[i : i+1], nil
}

func (r *run) settle(ctx context.Context, st *Step) error {
	s, err := r.session(st)
	if err != nil {
		return err
	}
	ms := st.DelayMS
	if st.Op == "extend" {
		ms = st.MS
	}
	if st.Handle != "" {
		_, err := outcome(st, s.SettleHandle(ctx, r.x(st.Handle), st.Op, ms))
		return err
	}
	ds, err := r.deliveries(st.Msg)
	if err != nil {
		return err
	}
	if len(ds) == 0 {
		return fmt.Errorf("%q holds no messages", st.Msg)
	}
	for i, d := range ds {
		if _, err := outcome(st, s.Settle(ctx, d, st.Op, ms)); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
	}
	return nil
}

// receive collects count deliveries from one subscription (receive) or from
// several, in turn (receive_all), acking each if asked.
func (r *run) receive(ctx context.Context, st *Step) error {
	names := st.Subs
	if st.Sub != "" {
		names = append([]string{st.Sub}, names...)
	}
	var subs []Subscription
	for _, n := range names {
		sub, ok := r.subs[n]
		if !ok {
			return fmt.Errorf("no subscription %q", n)
		}
		subs = append(subs, sub)
	}
	if len(subs) == 0 {
		return errors.New("receive needs sub or subs")
	}
	var got []*Delivery
	slice := 25 * time.Millisecond
	if len(subs) == 1 {
		slice = time.Hour
	}
	for len(got) < st.Count {
		if ctx.Err() != nil {
			return fmt.Errorf("received %d of %d before the timeout", len(got), st.Count)
		}
		for i, sub := range subs {
			sctx, cancel := context.WithTimeout(ctx, slice)
			d, err := sub.Next(sctx)
			cancel()
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errTimeout) {
					continue
				}
				return fmt.Errorf("subscription %s: %w", names[i], err)
			}
			got = append(got, d)
			if st.Ack {
				if err := r.sessionOf(names[i], st).Settle(ctx, d, "ack", 0); err != nil {
					return fmt.Errorf("ack: %w", err)
				}
			}
			if len(got) == st.Count {
				break
			}
		}
	}
	if st.Save != "" {
		r.saved[st.Save] = got
	}
	return r.checkDeliveries(st.Expect, got)
}

// sessionOf finds the session a subscription was made on.
func (r *run) sessionOf(sub string, _ *Step) Session { return r.subConn[sub] }

func (r *run) quiet(ctx context.Context, st *Step) error {
	names := st.Subs
	if st.Sub != "" {
		names = append([]string{st.Sub}, names...)
	}
	ms := st.MS
	if ms == 0 {
		ms = 200
	}
	for _, n := range names {
		sub, ok := r.subs[n]
		if !ok {
			return fmt.Errorf("no subscription %q", n)
		}
		sctx, cancel := context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
		d, err := sub.Next(sctx)
		cancel()
		if err == nil {
			return fmt.Errorf("subscription %s got %q (delivery %d), want nothing", n, d.Data, d.DeliveryCount)
		}
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, errTimeout) {
			return fmt.Errorf("subscription %s: %w", n, err)
		}
	}
	return nil
}

func (r *run) rawConnect(ctx context.Context, st *Step) error {
	c, err := dialRaw(ctx, r.env.Addr)
	if err != nil {
		return err
	}
	r.raws[connName(st)] = c
	line, err := c.line(deadline(ctx))
	if err != nil {
		return fmt.Errorf("reading INFO: %w", err)
	}
	if !strings.HasPrefix(line, "INFO ") {
		return fmt.Errorf("first line %q is not INFO", line)
	}
	if st.Connect != nil {
		b, err := json.Marshal(st.Connect)
		if err != nil {
			return err
		}
		return c.write([]byte("CONNECT " + string(b) + "\r\n"))
	}
	fib := st.Fibril == nil || *st.Fibril
	crc := st.CRC == nil || *st.CRC
	if !fib {
		return c.write([]byte(`CONNECT {"verbose":false,"pedantic":false,"headers":true}` + "\r\n"))
	}
	if err := c.write([]byte(fmt.Sprintf(`CONNECT {"verbose":false,"pedantic":false,"headers":true,"fibril":1,"confirm":true,"crc":%t}`+"\r\n", crc))); err != nil {
		return err
	}
	if l, err := c.line(deadline(ctx)); err != nil || l != "+OK" {
		return fmt.Errorf("CONNECT answered %q, %v; want +OK", l, err)
	}
	return nil
}

// rawExpect reads one line per regular expression and matches it (the
// expression must match the whole line). PING lines from the server are
// answered and skipped. Capture groups are saved into st.Vars in order.
func (r *run) rawExpect(ctx context.Context, st *Step) error {
	c, ok := r.raws[connName(st)]
	if !ok {
		return fmt.Errorf("no raw connection %q", connName(st))
	}
	vi := 0
	for _, pat := range st.Lines {
		re, err := regexp.Compile("^(?:" + r.x(pat) + ")$")
		if err != nil {
			return fmt.Errorf("pattern %q: %w", pat, err)
		}
		var line string
		for {
			line, err = c.line(deadline(ctx))
			if err != nil {
				return fmt.Errorf("waiting for a line matching %q: %w", pat, err)
			}
			if line != "PING" {
				break
			}
			_ = c.write([]byte("PONG\r\n"))
		}
		m := re.FindStringSubmatch(line)
		if m == nil {
			return fmt.Errorf("line %q does not match %q", line, r.x(pat))
		}
		for _, g := range m[1:] {
			if vi < len(st.Vars) {
				r.vars[st.Vars[vi]] = g
				vi++
			}
		}
	}
	return nil
}
