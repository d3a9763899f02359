package protocol_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fibrilmq/fibril/protocol"
)

// A server connection's read path: parse what arrived, answer non-fatal
// errors, close on fatal ones, keep the partial rest for the next read.
func ExampleParser_Parse() {
	p := protocol.NewParser(protocol.ClientToServer, protocol.Limits{})
	var out []byte
	h := protocol.HandlerFunc(func(c *protocol.Command) error {
		switch c.Op {
		case protocol.OpConnect:
			conn, err := protocol.ParseConnect(c.JSON)
			if err != nil {
				return err
			}
			p.SetCRC(conn.CRC) // the next frame, even in this buffer, carries a checksum
			out = protocol.AppendOK(out)
		case protocol.OpPub:
			fmt.Printf("PUB %s %q crc=%08x\n", c.Subject, c.Payload, c.CRC)
			out = protocol.AppendConfirm(out, protocol.Position{Partition: 0, Seq: 1})
		}
		return nil
	})
	in := []byte("CONNECT {\"fibril\":1,\"crc\":true}\r\nPUB a..b 2 -\r\nhi\r\nPUB orders 5 -\r\nhello\r\nPUB orders 5 -\r\nhel")
	for {
		n, err := p.Parse(in, h)
		in = in[n:]
		var pe *protocol.Error
		if errors.As(err, &pe) {
			out = protocol.AppendError(out, pe, true)
			if pe.Fatal() {
				break // send out, then close
			}
			continue
		}
		break // nil: wait for more bytes; in holds the partial frame
	}
	fmt.Print(strings.ReplaceAll(string(out), "\r\n", "\n"))
	fmt.Printf("left %d bytes\n", len(in))
	// Output:
	// PUB orders "hello" crc=3610a686
	// +OK
	// -ERR 'invalid_subject subject is not valid: subject "a..b"'
	// +OK 0:1
	// left 19 bytes
}

func ExampleHandle() {
	h := protocol.Handle{Topic: 1, Group: 2, Partition: 0, Seq: 17, Attempt: 3}
	reply := h.Append(nil)
	back, _ := protocol.ParseHandle(reply)
	fmt.Println(string(reply), back.Attempt)
	// Output: $F.1.2.0.17.3 3
}
