package protocol

import (
	"github.com/fibrilmq/fibril/wire"

	"hash/crc32"
)

// This file holds the append-style encoders, one per frame (SPEC.md,
// "Verbs"). Each appends one complete frame, line end included, to dst and
// returns the extended slice; none allocates beyond growing dst. Callers pass
// arguments that are valid for the frame (the encoders do not validate
// subjects); the parser on the other side does.

// Text is a string or byte slice argument of an encoder.
type Text interface{ ~string | ~[]byte }

// CRCToken says what an encoder writes in the checksum slot of PUB, HPUB,
// MSG and HMSG: NoCRC (CRC mode off: no token), ComputeCRC (compute it from
// the header and payload), SkipCRC ("-", client→server only) or KnownCRC(v).
type CRCToken uint64

const (
	// NoCRC writes no checksum token (CRC mode off).
	NoCRC CRCToken = 0
	// ComputeCRC writes the CRC-32 (IEEE) of header block + payload.
	ComputeCRC CRCToken = 1 << 32
	// SkipCRC writes "-" (client→server only: "not given").
	SkipCRC  CRCToken = 2 << 32
	knownCRC CRCToken = 3 << 32
)

// KnownCRC writes v, a checksum already known (as stored with a message).
func KnownCRC(v uint32) CRCToken { return knownCRC | CRCToken(v) }

const crlf = "\r\n"

func appendCRCToken(dst []byte, t CRCToken, header, payload []byte) []byte {
	switch t &^ 0xffffffff {
	case ComputeCRC:
		v := crc32.Update(crc32.ChecksumIEEE(header), crc32.IEEETable, payload)
		return appendHex8(append(dst, ' '), v)
	case SkipCRC:
		return append(dst, " -"...)
	case knownCRC:
		return appendHex8(append(dst, ' '), uint32(t))
	}
	return dst
}

// AppendPub appends "PUB <subject> [reply] <#bytes> [crc]" and the payload.
// Pass an empty reply for none.
func AppendPub[S, R Text](dst []byte, subject S, reply R, payload []byte, crc CRCToken) []byte {
	dst = append(dst, "PUB "...)
	dst = append(dst, subject...)
	dst = appendOptional(dst, reply)
	dst = append(dst, ' ')
	dst = wire.AppendUint(dst, uint64(len(payload)))
	dst = appendCRCToken(dst, crc, nil, payload)
	dst = append(dst, crlf...)
	dst = append(dst, payload...)
	return append(dst, crlf...)
}

// AppendHPub appends "HPUB <subject> [reply] <#hdr> <#total> [crc]", the
// header block and the payload. header must be a complete block (see
// AppendHeader).
func AppendHPub[S, R Text](dst []byte, subject S, reply R, header, payload []byte, crc CRCToken) []byte {
	dst = append(dst, "HPUB "...)
	dst = append(dst, subject...)
	dst = appendOptional(dst, reply)
	return appendHBody(dst, header, payload, crc)
}

// AppendMsg appends "MSG <subject> <sid> [reply] <#bytes> [crc]" and the
// payload. For a delivery of a durable group, reply is the ack handle.
func AppendMsg[S, I, R Text](dst []byte, subject S, sid I, reply R, payload []byte, crc CRCToken) []byte {
	dst = append(dst, "MSG "...)
	dst = append(dst, subject...)
	dst = append(dst, ' ')
	dst = append(dst, sid...)
	dst = appendOptional(dst, reply)
	dst = append(dst, ' ')
	dst = wire.AppendUint(dst, uint64(len(payload)))
	dst = appendCRCToken(dst, crc, nil, payload)
	dst = append(dst, crlf...)
	dst = append(dst, payload...)
	return append(dst, crlf...)
}

// AppendHMsg appends "HMSG <subject> <sid> [reply] <#hdr> <#total> [crc]",
// the header block and the payload.
func AppendHMsg[S, I, R Text](dst []byte, subject S, sid I, reply R, header, payload []byte, crc CRCToken) []byte {
	dst = append(dst, "HMSG "...)
	dst = append(dst, subject...)
	dst = append(dst, ' ')
	dst = append(dst, sid...)
	dst = appendOptional(dst, reply)
	return appendHBody(dst, header, payload, crc)
}

func appendHBody(dst, header, payload []byte, crc CRCToken) []byte {
	dst = append(dst, ' ')
	dst = wire.AppendUint(dst, uint64(len(header)))
	dst = append(dst, ' ')
	dst = wire.AppendUint(dst, uint64(len(header)+len(payload)))
	dst = appendCRCToken(dst, crc, header, payload)
	dst = append(dst, crlf...)
	dst = append(dst, header...)
	dst = append(dst, payload...)
	return append(dst, crlf...)
}

func appendOptional[T Text](dst []byte, s T) []byte {
	if len(s) == 0 {
		return dst
	}
	dst = append(dst, ' ')
	return append(dst, s...)
}

// AppendSub appends "SUB <subject> [group] <sid> [max-inflight]". Pass an
// empty group for a plain subscription; maxInflight 0 writes none (it needs
// a group).
func AppendSub[S, G, I Text](dst []byte, subject S, group G, sid I, maxInflight int) []byte {
	dst = append(dst, "SUB "...)
	dst = append(dst, subject...)
	dst = appendOptional(dst, group)
	dst = append(dst, ' ')
	dst = append(dst, sid...)
	if maxInflight > 0 {
		dst = append(dst, ' ')
		dst = wire.AppendUint(dst, uint64(maxInflight))
	}
	return append(dst, crlf...)
}

// AppendUnsub appends "UNSUB <sid> [max-msgs]"; maxMsgs 0 writes none.
func AppendUnsub[I Text](dst []byte, sid I, maxMsgs int) []byte {
	dst = append(dst, "UNSUB "...)
	dst = append(dst, sid...)
	if maxMsgs > 0 {
		dst = append(dst, ' ')
		dst = wire.AppendUint(dst, uint64(maxMsgs))
	}
	return append(dst, crlf...)
}

// AppendPoll appends "POLL <topic> <group> <max> [wait-ms]"; waitMillis 0
// writes none.
func AppendPoll[S, G Text](dst []byte, topic S, group G, max int, waitMillis int64) []byte {
	dst = append(dst, "POLL "...)
	dst = append(dst, topic...)
	dst = append(dst, ' ')
	dst = append(dst, group...)
	dst = append(dst, ' ')
	dst = wire.AppendUint(dst, uint64(max))
	if waitMillis > 0 {
		dst = append(dst, ' ')
		dst = wire.AppendUint(dst, uint64(waitMillis))
	}
	return append(dst, crlf...)
}

// AppendAck appends "ACK <handle> [<handle> ...]". The caller keeps the line
// under the control-line limit (46 handles of maximal length fit in 4096
// bytes).
func AppendAck(dst []byte, handles ...Handle) []byte {
	dst = append(dst, "ACK"...)
	for _, h := range handles {
		dst = append(dst, ' ')
		dst = h.Append(dst)
	}
	return append(dst, crlf...)
}

// AppendNack appends "NACK <handle> [delay-ms]"; delayMillis 0 writes none.
func AppendNack(dst []byte, h Handle, delayMillis int64) []byte {
	return appendHandleCmd(dst, "NACK ", h, delayMillis)
}

// AppendReject appends "REJECT <handle>".
func AppendReject(dst []byte, h Handle) []byte { return appendHandleCmd(dst, "REJECT ", h, 0) }

// AppendExtend appends "EXTEND <handle> [ms]"; millis 0 writes none (the
// group's lease time).
func AppendExtend(dst []byte, h Handle, millis int64) []byte {
	return appendHandleCmd(dst, "EXTEND ", h, millis)
}

func appendHandleCmd(dst []byte, verb string, h Handle, ms int64) []byte {
	dst = append(dst, verb...)
	dst = h.Append(dst)
	if ms > 0 {
		dst = append(dst, ' ')
		dst = wire.AppendUint(dst, uint64(ms))
	}
	return append(dst, crlf...)
}

// AppendPing appends "PING".
func AppendPing(dst []byte) []byte { return append(dst, "PING\r\n"...) }

// AppendPong appends "PONG".
func AppendPong(dst []byte) []byte { return append(dst, "PONG\r\n"...) }

// AppendOK appends a bare "+OK".
func AppendOK(dst []byte) []byte { return append(dst, "+OK\r\n"...) }

// AppendOKText appends "+OK <text>" (a bare "+OK" when text is empty). text
// must be one line: management answers pass single-line JSON.
func AppendOKText[T Text](dst []byte, text T) []byte {
	if len(text) == 0 {
		return AppendOK(dst)
	}
	dst = append(dst, "+OK "...)
	dst = append(dst, text...)
	return append(dst, crlf...)
}

// AppendConfirm appends the publish confirm "+OK <partition>:<seq>",
// followed by " duplicate" when pos.Duplicate.
func AppendConfirm(dst []byte, pos Position) []byte {
	dst = append(dst, "+OK "...)
	dst = wire.AppendUint(dst, uint64(pos.Partition))
	dst = append(dst, ':')
	dst = wire.AppendUint(dst, pos.Seq)
	if pos.Duplicate {
		dst = append(dst, " "+confirmDuplicate...)
	}
	return append(dst, crlf...)
}

// AppendConfirmNotStored appends "+OK -": the publish reached no durable topic.
func AppendConfirmNotStored(dst []byte) []byte { return append(dst, "+OK -\r\n"...) }

// AppendPollDone appends "+OK <n>", the end of a POLL answer.
func AppendPollDone(dst []byte, n int) []byte {
	dst = append(dst, "+OK "...)
	dst = wire.AppendUint(dst, uint64(n))
	return append(dst, crlf...)
}

// AppendErr appends "-ERR '<text>'". Quotes and line ends in text are
// replaced (by " and a space) so the line stays one line.
func AppendErr[T Text](dst []byte, text T) []byte {
	dst = append(dst, "-ERR '"...)
	for i := 0; i < len(text); i++ {
		switch c := text[i]; c {
		case '\'':
			dst = append(dst, '"')
		case '\r', '\n':
			dst = append(dst, ' ')
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, "'\r\n"...)
}

// AppendError appends the -ERR line for e: the Fibril form
// "-ERR '<code> <text>[: <detail>]'" when fibril is true, else the NATS form.
func AppendError(dst []byte, e *Error, fibril bool) []byte {
	if fibril {
		return AppendErr(dst, e.Text())
	}
	return AppendErr(dst, e.NATSText())
}

// AppendTopicCreate appends "TOPIC CREATE <name> [json]"; config may be nil.
func AppendTopicCreate[N Text](dst []byte, name N, config []byte) []byte {
	return appendManage(dst, "TOPIC CREATE ", name, "", config)
}

// AppendTopicInfo appends "TOPIC INFO <name>".
func AppendTopicInfo[N Text](dst []byte, name N) []byte {
	return appendManage(dst, "TOPIC INFO ", name, "", nil)
}

// AppendTopicList appends "TOPIC LIST".
func AppendTopicList(dst []byte) []byte { return append(dst, "TOPIC LIST\r\n"...) }

// AppendTopicDelete appends "TOPIC DELETE <name>".
func AppendTopicDelete[N Text](dst []byte, name N) []byte {
	return appendManage(dst, "TOPIC DELETE ", name, "", nil)
}

// AppendTopicRequeue appends "TOPIC REQUEUE <name> [json]"; sel (a
// RequeueRequest's JSON) may be nil.
func AppendTopicRequeue[N Text](dst []byte, name N, sel []byte) []byte {
	return appendManage(dst, "TOPIC REQUEUE ", name, "", sel)
}

// AppendGroupCreate appends "GROUP CREATE <topic> <group> [json]"; config
// may be nil.
func AppendGroupCreate[N, G Text](dst []byte, topic N, group G, config []byte) []byte {
	return appendManage(dst, "GROUP CREATE ", topic, group, config)
}

// AppendGroupInfo appends "GROUP INFO <topic> <group>".
func AppendGroupInfo[N, G Text](dst []byte, topic N, group G) []byte {
	return appendManage(dst, "GROUP INFO ", topic, group, nil)
}

// AppendGroupList appends "GROUP LIST <topic>".
func AppendGroupList[N Text](dst []byte, topic N) []byte {
	return appendManage(dst, "GROUP LIST ", topic, "", nil)
}

// AppendGroupDelete appends "GROUP DELETE <topic> <group>".
func AppendGroupDelete[N, G Text](dst []byte, topic N, group G) []byte {
	return appendManage(dst, "GROUP DELETE ", topic, group, nil)
}

func appendManage[N, G Text](dst []byte, verb string, name N, group G, js []byte) []byte {
	dst = append(dst, verb...)
	dst = append(dst, name...)
	dst = appendOptional(dst, group)
	dst = appendOptional(dst, js)
	return append(dst, crlf...)
}
