package server

import "testing"

// TestSpecTelnetSession replays SPEC.md section 15 against the server.
func TestSpecTelnetSession(t *testing.T) {
	s := startDurable(t, nil)
	w := dialInfo(t, s)
	steps := []struct{ send, want string }{
		{"CONNECT {\"fibril\":1,\"crc\":true}\r\n", `^\+OK$`},
		{"ping\r\n", `^PONG$`},
		{"TOPIC CREATE orders\r\n", `^\+OK \{"name":"orders","id":1,"config":\{"subjects":\["orders"\],"partitions":1,"durability":"group","retention":"workqueue","full_policy":"block","block_timeout_ms":5000,"compression":"none","duplicate_window_ms":120000,"duplicate_max_ids":100000\},"msgs":0,"bytes":0,"partitions":\[\{"partition":0,"first_seq":0,"last_seq":0,"msgs":0,"bytes":0\}\],"groups":\[\]\}$`},
		{"GROUP CREATE orders billing {\"lease_ms\":60000,\"max_deliveries\":2}\r\n", `^\+OK \{"topic":"orders","name":"billing","id":1,"config":\{"start":"earliest","lease_ms":60000,"max_deliveries":2,"dead_letter":"\$DLQ.orders.billing","nats_ack":"auto"\},"pending":0,"inflight":0,`},
		{"PUB orders 5 -\r\nhello\r\n", `^\+OK 0:1$`},
		{"PUB orders 5 3a771143\r\nworld\r\n", `^\+OK 0:2$`},
		{"PUB orders 5 00000000\r\nhello\r\n", `^-ERR 'crc_mismatch payload checksum does not match: got 00000000, computed 3610a686'$`},
	}
	for _, st := range steps {
		w.send(st.send)
		w.expect(st.want)
	}
	w.send("POLL orders billing 10\r\n")
	w.expect(`^MSG orders 0 \$F\.1\.1\.0\.1\.1 5 3610a686$`)
	w.expectBody("hello")
	w.expect(`^MSG orders 0 \$F\.1\.1\.0\.2\.1 5 3a771143$`)
	w.expectBody("world")
	w.expect(`^\+OK 2$`)
	w.send("ACK $F.1.1.0.1.1\r\nNACK $F.1.1.0.2.1\r\nPOLL orders billing 10 1000\r\n")
	w.expect(`^\+OK$`)
	w.expect(`^\+OK$`)
	w.expect(`^MSG orders 0 \$F\.1\.1\.0\.2\.2 5 3a771143$`)
	w.expectBody("world")
	w.expect(`^\+OK 1$`)
	w.send("ACK $F.1.1.0.2.1\r\n")
	w.expect(`^-ERR 'stale_handle ack handle is superseded by a later delivery`)
	w.send("NACK $F.1.1.0.2.2\r\nPOLL orders billing 10\r\nTOPIC LIST\r\n")
	w.expect(`^\+OK$`)
	w.expect(`^\+OK 0$`)
	w.expect(`^\+OK \{"topics":\["\$DLQ.orders.billing","orders"\]\}$`)
	w.send("POLL $DLQ.orders.billing ops 1 2000\r\n")
	w.expect(`^HMSG \$DLQ\.orders\.billing 0 \$F\.2\.2\.0\.1\.1 125 130 7edc6df4$`)
	w.expectBody("NATS/1.0\r\nFibril-Reason: max_deliveries\r\nFibril-Subject: orders\r\nFibril-Partition: 0\r\nFibril-Seq: 2\r\nFibril-Deliveries: 2\r\n\r\nworld")
	w.expect(`^\+OK 1$`)
	w.send("ACK $F.2.2.0.1.1\r\nSUB _INBOX.demo 7\r\nPUB _INBOX.demo 2 -\r\nhi\r\n")
	// The push delivery may come between any two answers (SPEC.md 4).
	var answers []string
	sawMsg := false
	for len(answers) < 3 || !sawMsg {
		l := w.expect(`^(\+OK|\+OK -|MSG _INBOX.demo 7 2 d8932aac)$`)
		if l[0] == 'M' {
			w.expectBody("hi")
			sawMsg = true
			continue
		}
		answers = append(answers, l)
	}
	if answers[0] != "+OK" || answers[1] != "+OK" || answers[2] != "+OK -" {
		t.Fatalf("answers %q", answers)
	}
	w.send("FOO\r\nPING\r\n")
	w.expect(`^-ERR 'unknown_op unknown protocol operation: "FOO"'$`)
	w.expect(`^PONG$`)
}
