package protocol

import "fmt"

// AppendCommand appends the frame c describes, for tools, tests and the
// conformance vectors (hot paths call the specific encoders). crc says
// whether CRC mode is on: then PUB/HPUB/MSG/HMSG get a computed checksum when
// c.HasCRC is true and "-" otherwise. It returns an error for OpInvalid or an
// Op that needs fields c lacks.
func AppendCommand(dst []byte, c *Command, crc bool) ([]byte, error) {
	tok := NoCRC
	if crc {
		tok = SkipCRC
		if c.HasCRC {
			tok = ComputeCRC
		}
	}
	switch c.Op {
	case OpInfo:
		return appendVerbText(dst, "INFO ", c.JSON), nil
	case OpConnect:
		return appendVerbText(dst, "CONNECT ", c.JSON), nil
	case OpPing:
		return AppendPing(dst), nil
	case OpPong:
		return AppendPong(dst), nil
	case OpOK:
		return AppendOKText(dst, c.Text), nil
	case OpErr:
		return AppendErr(dst, c.Text), nil
	case OpPub:
		return AppendPub(dst, c.Subject, c.Reply, c.Payload, tok), nil
	case OpHPub:
		return AppendHPub(dst, c.Subject, c.Reply, c.Header, c.Payload, tok), nil
	case OpMsg:
		return AppendMsg(dst, c.Subject, c.Sid, c.Reply, c.Payload, tok), nil
	case OpHMsg:
		return AppendHMsg(dst, c.Subject, c.Sid, c.Reply, c.Header, c.Payload, tok), nil
	case OpSub:
		return AppendSub(dst, c.Subject, c.Group, c.Sid, int(c.Max)), nil
	case OpUnsub:
		return AppendUnsub(dst, c.Sid, int(c.Max)), nil
	case OpPoll:
		return AppendPoll(dst, c.Subject, c.Group, int(c.Max), c.Millis), nil
	case OpAck:
		if len(c.Handles) == 0 {
			return dst, fmt.Errorf("protocol: ACK needs at least one handle")
		}
		return AppendAck(dst, c.Handles...), nil
	case OpNack, OpReject, OpExtend:
		if len(c.Handles) != 1 {
			return dst, fmt.Errorf("protocol: %v needs exactly one handle", c.Op)
		}
		switch c.Op {
		case OpNack:
			return AppendNack(dst, c.Handles[0], c.Millis), nil
		case OpReject:
			return AppendReject(dst, c.Handles[0]), nil
		}
		return AppendExtend(dst, c.Handles[0], c.Millis), nil
	case OpTopicCreate:
		return AppendTopicCreate(dst, c.Subject, c.JSON), nil
	case OpTopicInfo:
		return AppendTopicInfo(dst, c.Subject), nil
	case OpTopicList:
		return AppendTopicList(dst), nil
	case OpTopicDelete:
		return AppendTopicDelete(dst, c.Subject), nil
	case OpTopicRequeue:
		return AppendTopicRequeue(dst, c.Subject, c.JSON), nil
	case OpGroupCreate:
		return AppendGroupCreate(dst, c.Subject, c.Group, c.JSON), nil
	case OpGroupInfo:
		return AppendGroupInfo(dst, c.Subject, c.Group), nil
	case OpGroupList:
		return AppendGroupList(dst, c.Subject), nil
	case OpGroupDelete:
		return AppendGroupDelete(dst, c.Subject, c.Group), nil
	}
	return dst, fmt.Errorf("protocol: cannot encode %v", c.Op)
}

func appendVerbText(dst []byte, verb string, text []byte) []byte {
	dst = append(dst, verb...)
	dst = append(dst, text...)
	return append(dst, crlf...)
}
