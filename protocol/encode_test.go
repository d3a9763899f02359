package protocol

import (
	"bytes"
	"testing"
)

func TestEncoders(t *testing.T) {
	h := Handle{Topic: 1, Group: 2, Partition: 0, Seq: 5, Attempt: 1}
	hdr := AppendHeader(nil, HeaderKey, "cust-42")
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"PUB", AppendPub(nil, "orders", "", []byte("hello"), NoCRC), "PUB orders 5\r\nhello\r\n"},
		{"PUB reply bytes", AppendPub(nil, []byte("orders"), []byte("r.1"), []byte("hello"), NoCRC), "PUB orders r.1 5\r\nhello\r\n"},
		{"PUB crc", AppendPub(nil, "orders", "", []byte("hello"), ComputeCRC), "PUB orders 5 3610a686\r\nhello\r\n"},
		{"PUB skip", AppendPub(nil, "orders", "", []byte("hello"), SkipCRC), "PUB orders 5 -\r\nhello\r\n"},
		{"PUB known", AppendPub(nil, "o", "", []byte("x"), KnownCRC(0xa)), "PUB o 1 0000000a\r\nx\r\n"},
		{"HPUB", AppendHPub(nil, "orders", "", hdr, []byte("hello"), NoCRC), "HPUB orders 33 38\r\nNATS/1.0\r\nFibril-Key: cust-42\r\n\r\nhello\r\n"},
		{"HPUB crc", AppendHPub(nil, "orders", "r", hdr, []byte("hello"), ComputeCRC), "HPUB orders r 33 38 232f7392\r\nNATS/1.0\r\nFibril-Key: cust-42\r\n\r\nhello\r\n"},
		{"MSG", AppendMsg(nil, "orders", "1", "", []byte("hello"), NoCRC), "MSG orders 1 5\r\nhello\r\n"},
		{"MSG handle", AppendMsg(nil, "orders", "0", h.String(), []byte("hello"), KnownCRC(0x3610a686)), "MSG orders 0 $F.1.2.0.5.1 5 3610a686\r\nhello\r\n"},
		{"HMSG", AppendHMsg(nil, "orders", "9", "", hdr, nil, NoCRC), "HMSG orders 9 33 33\r\nNATS/1.0\r\nFibril-Key: cust-42\r\n\r\n\r\n"},
		{"SUB", AppendSub(nil, "a.*", "", "1", 0), "SUB a.* 1\r\n"},
		{"SUB group max", AppendSub(nil, "orders", "billing", "2", 16), "SUB orders billing 2 16\r\n"},
		{"UNSUB", AppendUnsub(nil, "2", 0), "UNSUB 2\r\n"},
		{"UNSUB max", AppendUnsub(nil, "2", 10), "UNSUB 2 10\r\n"},
		{"POLL", AppendPoll(nil, "orders", "billing", 10, 0), "POLL orders billing 10\r\n"},
		{"POLL wait", AppendPoll(nil, "orders", "billing", 10, 5000), "POLL orders billing 10 5000\r\n"},
		{"ACK", AppendAck(nil, h, h), "ACK $F.1.2.0.5.1 $F.1.2.0.5.1\r\n"},
		{"NACK", AppendNack(nil, h, 0), "NACK $F.1.2.0.5.1\r\n"},
		{"NACK delay", AppendNack(nil, h, 1000), "NACK $F.1.2.0.5.1 1000\r\n"},
		{"REJECT", AppendReject(nil, h), "REJECT $F.1.2.0.5.1\r\n"},
		{"EXTEND", AppendExtend(nil, h, 60000), "EXTEND $F.1.2.0.5.1 60000\r\n"},
		{"PING", AppendPing(nil), "PING\r\n"},
		{"PONG", AppendPong(nil), "PONG\r\n"},
		{"OK", AppendOK(nil), "+OK\r\n"},
		{"OK text", AppendOKText(nil, "{}"), "+OK {}\r\n"},
		{"OK empty text", AppendOKText(nil, ""), "+OK\r\n"},
		{"confirm", AppendConfirm(nil, Position{Partition: 3, Seq: 17}), "+OK 3:17\r\n"},
		{"confirm duplicate", AppendConfirm(nil, Position{Partition: 3, Seq: 17, Duplicate: true}), "+OK 3:17 duplicate\r\n"},
		{"not stored", AppendConfirmNotStored(nil), "+OK -\r\n"},
		{"poll done", AppendPollDone(nil, 2), "+OK 2\r\n"},
		{"ERR", AppendErr(nil, "it's\r\nbad"), "-ERR 'it\"s  bad'\r\n"},
		{"ERR fibril", AppendError(nil, &Error{Code: CodeCRCMismatch}, true), "-ERR 'crc_mismatch payload checksum does not match'\r\n"},
		{"ERR nats", AppendError(nil, &Error{Code: CodeMaxPayload, Detail: "x"}, false), "-ERR 'Maximum Payload Violation'\r\n"},
		{"ERR nats fallback", AppendError(nil, &Error{Code: CodeStaleHandle}, false), "-ERR 'stale_handle ack handle is superseded by a later delivery'\r\n"},
		{"ERR nats permission", AppendError(nil, &Error{Code: CodePermissionDenied, Detail: "for Publish to \"a\""}, false), "-ERR 'Permissions Violation for Publish to \"a\"'\r\n"},
		{"TOPIC CREATE", AppendTopicCreate(nil, "orders", []byte(`{"partitions":2}`)), "TOPIC CREATE orders {\"partitions\":2}\r\n"},
		{"TOPIC CREATE bare", AppendTopicCreate(nil, "orders", nil), "TOPIC CREATE orders\r\n"},
		{"TOPIC INFO", AppendTopicInfo(nil, "orders"), "TOPIC INFO orders\r\n"},
		{"TOPIC LIST", AppendTopicList(nil), "TOPIC LIST\r\n"},
		{"TOPIC DELETE", AppendTopicDelete(nil, "orders"), "TOPIC DELETE orders\r\n"},
		{"GROUP CREATE", AppendGroupCreate(nil, "orders", "billing", []byte("{}")), "GROUP CREATE orders billing {}\r\n"},
		{"GROUP INFO", AppendGroupInfo(nil, "orders", "billing"), "GROUP INFO orders billing\r\n"},
		{"GROUP LIST", AppendGroupList(nil, "orders"), "GROUP LIST orders\r\n"},
		{"GROUP DELETE", AppendGroupDelete(nil, "orders", "billing"), "GROUP DELETE orders billing\r\n"},
	}
	for _, tc := range tests {
		if string(tc.got) != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestEncodersAppend(t *testing.T) {
	dst := []byte("PING\r\n")
	dst = AppendPub(dst, "a", "", []byte("x"), NoCRC)
	if string(dst) != "PING\r\nPUB a 1\r\nx\r\n" {
		t.Fatalf("encoders must append: %q", dst)
	}
}

func TestAppendCommandErrors(t *testing.T) {
	for _, c := range []Command{{}, {Op: OpAck}, {Op: OpNack}, {Op: Op(200)}} {
		if _, err := AppendCommand(nil, &c, false); err == nil {
			t.Errorf("AppendCommand(%v) did not fail", c.Op)
		}
	}
}

func TestAppendInfoConnect(t *testing.T) {
	info := &Info{ServerID: "S", Proto: 1, MaxPayload: 1 << 20, Fibril: 1, MaxUnconfirmed: 1024, CRC: true}
	b, err := AppendInfo(nil, info)
	if err != nil || !bytes.HasPrefix(b, []byte("INFO {")) || !bytes.HasSuffix(b, []byte("}\r\n")) || bytes.Count(b, []byte("\n")) != 1 {
		t.Fatalf("AppendInfo = %q, %v", b, err)
	}
	var got Info
	p := NewParser(ServerToClient, Limits{})
	if _, err := p.Parse(b, HandlerFunc(func(c *Command) error {
		var err error
		got, err = ParseInfo(c.JSON)
		return err
	})); err != nil {
		t.Fatal(err)
	}
	if got.ServerID != "S" || got.MaxUnconfirmed != 1024 || !got.CRC || got.Fibril != 1 || got.MaxPayload != 1<<20 {
		t.Fatalf("INFO round trip: %+v", got)
	}
	b, err = AppendConnect(nil, &Connect{Fibril: 1, CRC: true, Name: "a\nb"})
	if err != nil || bytes.Count(b, []byte("\n")) != 1 {
		t.Fatalf("AppendConnect = %q, %v", b, err)
	}
	if _, err := AppendOKJSON(nil, func() {}); err == nil {
		t.Fatal("AppendOKJSON of a func did not fail")
	}
	b, err = AppendOKJSON(nil, TopicList{Topics: []string{"a"}})
	if err != nil || string(b) != "+OK {\"topics\":[\"a\"]}\r\n" {
		t.Fatalf("AppendOKJSON = %q, %v", b, err)
	}
}
