package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

// The conformance vectors (conformance/vectors/README.md) are the contract
// shared with the Python and TypeScript SDKs; these tests hold the Go parser
// and encoders to them.

const vectorDir = "../conformance/vectors"

type frameFile struct {
	Description string        `json:"description"`
	Vectors     []frameVector `json:"vectors"`
}

type frameVector struct {
	Name            string         `json:"name"`
	Description     string         `json:"description"`
	Direction       string         `json:"direction"`
	CRC             bool           `json:"crc"`
	CRCAfterConnect bool           `json:"crc_after_connect"`
	Limits          map[string]int `json:"limits"`
	Wire            string         `json:"wire"`
	Canonical       bool           `json:"canonical"`
	Events          []vEvent       `json:"events"`
	Consumed        int            `json:"consumed"`
}

// vEvent is one expected (or observed) parse event: a command (Op set) or an
// error (Error set). Byte fields hold Latin-1 strings as in the files.
type vEvent struct {
	Op      string   `json:"op,omitempty"`
	Subject string   `json:"subject,omitempty"`
	Reply   string   `json:"reply,omitempty"`
	Group   string   `json:"group,omitempty"`
	Sid     string   `json:"sid,omitempty"`
	Header  string   `json:"header,omitempty"`
	Payload string   `json:"payload,omitempty"`
	CRC     string   `json:"crc,omitempty"`
	HasCRC  bool     `json:"has_crc,omitempty"`
	Max     int64    `json:"max,omitempty"`
	Millis  int64    `json:"millis,omitempty"`
	Handles []string `json:"handles,omitempty"`
	Text    string   `json:"text,omitempty"`
	JSON    string   `json:"json,omitempty"`
	Error   string   `json:"error,omitempty"`
	Fatal   bool     `json:"fatal,omitempty"`
}

// latin1 turns a vector string into bytes: one byte per code point.
func latin1(t testing.TB, s string) []byte {
	t.Helper()
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff {
			t.Fatalf("vector string has code point %U above U+00FF", r)
		}
		out = append(out, byte(r))
	}
	return out
}

func fromLatin1(b []byte) string {
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return string(r)
}

func hasBody(op Op) bool { return op == OpPub || op == OpHPub || op == OpMsg || op == OpHMsg }

func eventOf(c *Command, crcMode bool) vEvent {
	e := vEvent{
		Op: c.Op.String(), Subject: fromLatin1(c.Subject), Reply: fromLatin1(c.Reply),
		Group: fromLatin1(c.Group), Sid: fromLatin1(c.Sid), Header: fromLatin1(c.Header),
		Payload: fromLatin1(c.Payload), HasCRC: c.HasCRC, Max: c.Max, Millis: c.Millis,
		Text: fromLatin1(c.Text), JSON: fromLatin1(c.JSON),
	}
	if crcMode && hasBody(c.Op) {
		e.CRC = fmt.Sprintf("%08x", c.CRC)
	}
	for _, h := range c.Handles {
		e.Handles = append(e.Handles, h.String())
	}
	return e
}

func loadFrameFiles(t *testing.T) map[string]frameFile {
	t.Helper()
	files := map[string]frameFile{}
	for _, name := range []string{"client_to_server.json", "server_to_client.json", "crc.json", "invalid.json"} {
		raw, err := os.ReadFile(filepath.Join(vectorDir, name))
		if err != nil {
			t.Fatal(err)
		}
		var f frameFile
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		files[name] = f
	}
	return files
}

func vectorParser(t testing.TB, v frameVector) *Parser {
	dir := ClientToServer
	switch v.Direction {
	case "client_to_server":
	case "server_to_client":
		dir = ServerToClient
	default:
		t.Fatalf("%s: direction %q", v.Name, v.Direction)
	}
	p := NewParser(dir, Limits{MaxControlLine: v.Limits["max_control_line"], MaxPayload: v.Limits["max_payload"]})
	p.SetCRC(v.CRC)
	return p
}

// runChunks feeds the wire in the given chunks the way a connection does
// (append to a buffer, parse, drop what was consumed) and returns the events
// and the total bytes consumed.
func runChunks(t testing.TB, v frameVector, chunks [][]byte) ([]vEvent, int) {
	p := vectorParser(t, v)
	var events []vEvent
	h := HandlerFunc(func(c *Command) error {
		events = append(events, eventOf(c, p.CRC()))
		if c.Op == OpConnect && v.CRCAfterConnect {
			p.SetCRC(true)
		}
		return nil
	})
	var buf []byte
	consumed := 0
	for _, chunk := range chunks {
		buf = append(buf, chunk...)
		for len(buf) > 0 {
			n, err := p.Parse(buf, h)
			if n < 0 || n > len(buf) {
				t.Fatalf("%s: Parse consumed %d of %d", v.Name, n, len(buf))
			}
			buf = buf[n:]
			consumed += n
			if err == nil {
				break
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("%s: error %v is not an *Error", v.Name, err)
			}
			events = append(events, vEvent{Error: string(pe.Code), Fatal: pe.Fatal()})
			if pe.Fatal() {
				return events, consumed
			}
		}
	}
	return events, consumed
}

func checkEvents(t *testing.T, name, how string, got []vEvent, gotN int, v frameVector) {
	t.Helper()
	want := v.Events
	if len(want) == 0 {
		want = nil
	}
	if !reflect.DeepEqual(got, want) || gotN != v.Consumed {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Errorf("%s (%s):\n got %s consumed %d\nwant %s consumed %d", name, how, g, gotN, w, v.Consumed)
	}
}

func TestVectorsFrames(t *testing.T) {
	files := loadFrameFiles(t)
	total := 0
	for fname, f := range files {
		names := map[string]bool{}
		for _, v := range f.Vectors {
			total++
			if names[v.Name] {
				t.Errorf("%s: vector name %q used twice", fname, v.Name)
			}
			names[v.Name] = true
			t.Run(fname+"/"+v.Name, func(t *testing.T) {
				wire := latin1(t, v.Wire)
				got, n := runChunks(t, v, [][]byte{wire})
				checkEvents(t, v.Name, "whole", got, n, v)

				bytewise := make([][]byte, len(wire))
				for i := range wire {
					bytewise[i] = wire[i : i+1]
				}
				got, n = runChunks(t, v, bytewise)
				checkEvents(t, v.Name, "byte at a time", got, n, v)

				rng := rand.New(rand.NewSource(int64(len(wire))))
				for round := 0; round < 20; round++ {
					var chunks [][]byte
					for rest := wire; len(rest) > 0; {
						k := 1 + rng.Intn(len(rest))
						chunks = append(chunks, rest[:k])
						rest = rest[k:]
					}
					got, n = runChunks(t, v, chunks)
					checkEvents(t, v.Name, "random split "+strconv.Itoa(round), got, n, v)
				}
				if v.Canonical {
					checkCanonical(t, v, wire)
				}
			})
		}
	}
	if total < 80 {
		t.Fatalf("only %d frame vectors, want >= 80", total)
	}
}

// checkCanonical encodes the expected commands and compares with the wire.
func checkCanonical(t *testing.T, v frameVector, wire []byte) {
	crc := v.CRC
	var out []byte
	for _, e := range v.Events {
		if e.Error != "" {
			t.Fatalf("%s: canonical vector with an error event", v.Name)
		}
		c := commandOf(t, e)
		var err error
		if out, err = AppendCommand(out, &c, crc); err != nil {
			t.Fatalf("%s: AppendCommand: %v", v.Name, err)
		}
		if c.Op == OpConnect && v.CRCAfterConnect {
			crc = true
		}
	}
	if !bytes.Equal(out, wire) {
		t.Errorf("%s: encoded\n%q\nwant\n%q", v.Name, out, wire)
	}
}

func commandOf(t *testing.T, e vEvent) Command {
	op := ParseOp(e.Op)
	if op == OpInvalid {
		t.Fatalf("unknown op %q", e.Op)
	}
	opt := func(s string) []byte {
		if s == "" {
			return nil
		}
		return latin1(t, s)
	}
	c := Command{Op: op, Subject: opt(e.Subject), Reply: opt(e.Reply), Group: opt(e.Group), Sid: opt(e.Sid),
		Header: opt(e.Header), Payload: opt(e.Payload), HasCRC: e.HasCRC, Max: e.Max, Millis: e.Millis,
		Text: opt(e.Text), JSON: opt(e.JSON)}
	for _, s := range e.Handles {
		h, err := ParseHandle([]byte(s))
		if err != nil {
			t.Fatalf("handle %q: %v", s, err)
		}
		c.Handles = append(c.Handles, h)
	}
	return c
}

func TestVectorsHandles(t *testing.T) {
	var f struct {
		Vectors []struct {
			Wire   string            `json:"wire"`
			Handle map[string]string `json:"handle"`
			Error  string            `json:"error"`
			Desc   string            `json:"description"`
		} `json:"vectors"`
	}
	readVectorFile(t, "handles.json", &f)
	for _, v := range f.Vectors {
		h, err := ParseHandle(latin1(t, v.Wire))
		if v.Error != "" {
			var pe *Error
			if !errors.As(err, &pe) || string(pe.Code) != v.Error {
				t.Errorf("ParseHandle(%q) = %v, %v; want error %s (%s)", v.Wire, h, err, v.Error, v.Desc)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseHandle(%q): %v", v.Wire, err)
			continue
		}
		got := map[string]string{
			"topic": strconv.FormatUint(h.Topic, 10), "group": strconv.FormatUint(h.Group, 10),
			"partition": strconv.FormatUint(uint64(h.Partition), 10), "seq": strconv.FormatUint(h.Seq, 10),
			"attempt": strconv.FormatUint(uint64(h.Attempt), 10),
		}
		if !reflect.DeepEqual(got, v.Handle) {
			t.Errorf("ParseHandle(%q) = %v, want %v", v.Wire, got, v.Handle)
		}
		if s := h.String(); s != v.Wire {
			t.Errorf("Handle.String() = %q, want %q", s, v.Wire)
		}
	}
}

func TestVectorsSubjects(t *testing.T) {
	var f struct {
		Vectors []struct {
			Subject   string `json:"subject"`
			Wildcards bool   `json:"wildcards"`
			Error     string `json:"error"`
		} `json:"vectors"`
	}
	readVectorFile(t, "subjects.json", &f)
	for _, v := range f.Vectors {
		err := CheckSubject(latin1(t, v.Subject), v.Wildcards)
		got := ""
		var pe *Error
		if errors.As(err, &pe) {
			got = string(pe.Code)
		} else if err != nil {
			t.Fatalf("CheckSubject(%q): %v is not an *Error", v.Subject, err)
		}
		if got != v.Error {
			t.Errorf("CheckSubject(%q, %v) = %q, want %q", v.Subject, v.Wildcards, got, v.Error)
		}
	}
}

func TestVectorsAckBodies(t *testing.T) {
	var f struct {
		Vectors []struct {
			Body    string `json:"body"`
			Kind    string `json:"kind"`
			DelayNs int64  `json:"delay_ns"`
			Error   string `json:"error"`
		} `json:"vectors"`
	}
	readVectorFile(t, "ack_bodies.json", &f)
	kinds := map[AckKind]string{AckAck: "ack", AckNak: "nak", AckProgress: "progress", AckTerm: "term"}
	for _, v := range f.Vectors {
		k, d, err := ParseAckBody(latin1(t, v.Body))
		if v.Error != "" {
			if !errors.Is(err, &Error{Code: Code(v.Error)}) {
				t.Errorf("ParseAckBody(%q) = %v, %v, %v; want %s", v.Body, k, d, err, v.Error)
			}
			continue
		}
		if err != nil || kinds[k] != v.Kind || d != v.DelayNs {
			t.Errorf("ParseAckBody(%q) = %v, %d, %v; want %s, %d", v.Body, k, d, err, v.Kind, v.DelayNs)
		}
	}
}

func readVectorFile(t testing.TB, name string, v any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(vectorDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func TestVectorsConfirms(t *testing.T) {
	var f struct {
		Vectors []struct {
			Text      string `json:"text"`
			Stored    bool   `json:"stored"`
			Partition uint32 `json:"partition"`
			Seq       string `json:"seq"`
			Duplicate bool   `json:"duplicate"`
			Error     string `json:"error"`
		} `json:"vectors"`
	}
	readVectorFile(t, "confirms.json", &f)
	for _, v := range f.Vectors {
		pos, stored, err := ParseConfirm(latin1(t, v.Text))
		if v.Error != "" {
			if !errors.Is(err, &Error{Code: Code(v.Error)}) {
				t.Errorf("ParseConfirm(%q) err = %v, want %s", v.Text, err, v.Error)
			}
			continue
		}
		seq := uint64(0)
		if v.Seq != "" {
			seq, _ = strconv.ParseUint(v.Seq, 10, 64)
		}
		if err != nil || stored != v.Stored || pos != (Position{Partition: v.Partition, Seq: seq, Duplicate: v.Duplicate}) {
			t.Errorf("ParseConfirm(%q) = %v, %v, %v", v.Text, pos, stored, err)
		}
	}
}

func TestVectorsErrTexts(t *testing.T) {
	var f struct {
		Vectors []struct {
			Text   string `json:"text"`
			Code   string `json:"code"`
			Detail string `json:"detail"`
		} `json:"vectors"`
	}
	readVectorFile(t, "err_texts.json", &f)
	for _, v := range f.Vectors {
		e := ParseErrText(latin1(t, v.Text))
		if string(e.Code) != v.Code || e.Detail != v.Detail {
			t.Errorf("ParseErrText(%q) = %s %q, want %s %q", v.Text, e.Code, e.Detail, v.Code, v.Detail)
		}
	}
}

// TestVectorsUpToDate regenerates the vectors into a temporary directory and
// compares, so a hand edit of a JSON file (or of the generator without
// regenerating) fails. Skipped where python3 is missing.
func TestVectorsUpToDate(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	dir := t.TempDir()
	out, err := exec.Command(py, filepath.Join(vectorDir, "gen_vectors.py"), dir).CombinedOutput()
	if err != nil {
		t.Fatalf("gen_vectors.py: %v\n%s", err, out)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("generator wrote nothing: %v", err)
	}
	for _, f := range files {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(vectorDir, filepath.Base(f)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s differs from gen_vectors.py output: run python3 conformance/vectors/gen_vectors.py", filepath.Base(f))
		}
	}
}
