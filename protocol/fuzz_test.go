package protocol

import (
	"errors"
	"reflect"
	"testing"
)

// fuzzResult is what parsing one input yields: events (commands and errors),
// the canonical encoding of each command (taken while it was borrowed), and
// the bytes consumed.
type fuzzResult struct {
	events   []vEvent
	encoded  [][]byte
	crcAt    []bool
	consumed int
}

func fuzzRun(t *testing.T, dir Direction, crc bool, lim Limits, chunks [][]byte) fuzzResult {
	p := NewParser(dir, lim)
	p.SetCRC(crc)
	var r fuzzResult
	h := HandlerFunc(func(c *Command) error {
		r.events = append(r.events, eventOf(c, p.CRC()))
		enc, err := AppendCommand(nil, c, p.CRC())
		if err != nil {
			t.Fatalf("AppendCommand(%v): %v", c.Op, err)
		}
		r.encoded = append(r.encoded, enc)
		r.crcAt = append(r.crcAt, p.CRC())
		return nil
	})
	var buf []byte
	for _, chunk := range chunks {
		buf = append(buf, chunk...)
		for len(buf) > 0 {
			n, err := p.Parse(buf, h)
			if n < 0 || n > len(buf) {
				t.Fatalf("Parse consumed %d of %d", n, len(buf))
			}
			buf = buf[n:]
			r.consumed += n
			if err == nil {
				break
			}
			var pe *Error
			if !errors.As(err, &pe) || !pe.Code.Known() {
				t.Fatalf("Parse error %v is not an *Error with a table code", err)
			}
			if pe.Fatal() {
				// A fatal error consumes nothing of the bad frame: parsing
				// again from there fails the same way at once.
				n2, err2 := p.Parse(buf, HandlerFunc(func(*Command) error { t.Fatal("handler called after fatal error"); return nil }))
				if n2 != 0 || !errors.Is(err2, pe) {
					t.Fatalf("%s: re-parse after fatal error gave %d, %v", pe.Code, n2, err2)
				}
			}
			r.events = append(r.events, vEvent{Error: string(pe.Code), Fatal: pe.Fatal()})
			r.encoded = append(r.encoded, nil)
			r.crcAt = append(r.crcAt, false)
			if pe.Fatal() {
				return r
			}
		}
	}
	return r
}

// FuzzParse feeds arbitrary bytes, split at an arbitrary point, in either
// direction and CRC mode. It checks that Parse never panics, that the split
// does not change the result, and that every command it yields survives
// parse(encode(x)) == x.
func FuzzParse(f *testing.F) {
	files := map[string]frameFile{}
	for _, name := range []string{"client_to_server.json", "server_to_client.json", "crc.json", "invalid.json"} {
		var ff frameFile
		readVectorFile(f, name, &ff)
		files[name] = ff
	}
	for _, ff := range files {
		for _, v := range ff.Vectors {
			var flags uint8
			if v.Direction == "server_to_client" {
				flags |= 1
			}
			if v.CRC {
				flags |= 2
			}
			if v.Limits != nil {
				flags |= 4
			}
			wire := latin1(f, v.Wire)
			f.Add(wire, uint16(len(wire)/2), flags)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, split uint16, flags uint8) {
		dir := ClientToServer
		if flags&1 != 0 {
			dir = ServerToClient
		}
		crc := flags&2 != 0
		lim := Limits{}
		if flags&4 != 0 {
			lim = Limits{MaxControlLine: 64, MaxPayload: 16}
		}
		whole := fuzzRun(t, dir, crc, lim, [][]byte{data})
		k := int(split) % (len(data) + 1)
		parts := fuzzRun(t, dir, crc, lim, [][]byte{data[:k], data[k:]})
		if !reflect.DeepEqual(whole.events, parts.events) || whole.consumed != parts.consumed {
			t.Fatalf("split at %d changed the result:\nwhole %+v (%d)\nsplit %+v (%d)", k, whole.events, whole.consumed, parts.events, parts.consumed)
		}
		big := p2(lim)
		for i, enc := range whole.encoded {
			if enc == nil {
				continue
			}
			again := fuzzRun(t, dir, whole.crcAt[i], big, [][]byte{enc})
			want := whole.events[i]
			if want.Op == "-ERR" {
				want.Text = sanitize(want.Text)
			}
			if len(again.events) != 1 || !reflect.DeepEqual(again.events[0], want) || again.consumed != len(enc) {
				t.Fatalf("parse(encode(x)) != x:\n   x %+v\n enc %q\ngot %+v", want, enc, again.events)
			}
		}
	})
}

// p2 widens the line limits for re-parsing canonical encodings, which may be
// a little longer than the input (-ERR gains quotes).
func p2(l Limits) Limits {
	l = l.withDefaults()
	l.MaxControlLine += 64
	l.MaxJSONLine += 64
	return l
}
