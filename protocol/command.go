package protocol

import "github.com/fibrilmq/fibril/wire"

// Op identifies a command (a frame) of the wire protocol.
type Op uint8

// The ops. Client→server: CONNECT PING PONG PUB HPUB SUB UNSUB POLL ACK NACK
// REJECT EXTEND and the TOPIC/GROUP management verbs. Server→client: INFO
// PING PONG +OK -ERR MSG HMSG.
const (
	OpInvalid      Op = iota // the zero Op; never produced by the parser
	OpInfo                   // INFO {json}
	OpConnect                // CONNECT {json}
	OpPing                   // PING
	OpPong                   // PONG
	OpOK                     // +OK [args]
	OpErr                    // -ERR '<text>'
	OpPub                    // PUB <subject> [reply-to] <#bytes> [crc]
	OpHPub                   // HPUB <subject> [reply-to] <#hdr> <#total> [crc]
	OpSub                    // SUB <subject> [group] <sid> [max-inflight]
	OpUnsub                  // UNSUB <sid> [max-msgs]
	OpMsg                    // MSG <subject> <sid> [reply-to] <#bytes> [crc]
	OpHMsg                   // HMSG <subject> <sid> [reply-to] <#hdr> <#total> [crc]
	OpPoll                   // POLL <topic> <group> <max> [wait-ms]
	OpAck                    // ACK <handle> [<handle> ...]
	OpNack                   // NACK <handle> [delay-ms]
	OpReject                 // REJECT <handle>
	OpExtend                 // EXTEND <handle> [ms]
	OpTopicCreate            // TOPIC CREATE <name> [json]
	OpTopicInfo              // TOPIC INFO <name>
	OpTopicList              // TOPIC LIST
	OpTopicDelete            // TOPIC DELETE <name>
	OpTopicRequeue           // TOPIC REQUEUE <dead-letter topic> [json]
	OpGroupCreate            // GROUP CREATE <topic> <group> [json]
	OpGroupInfo              // GROUP INFO <topic> <group>
	OpGroupList              // GROUP LIST <topic>
	OpGroupDelete            // GROUP DELETE <topic> <group>
	opCount
)

var opNames = [opCount]string{
	OpInvalid: "INVALID", OpInfo: "INFO", OpConnect: "CONNECT", OpPing: "PING",
	OpPong: "PONG", OpOK: "+OK", OpErr: "-ERR", OpPub: "PUB", OpHPub: "HPUB",
	OpSub: "SUB", OpUnsub: "UNSUB", OpMsg: "MSG", OpHMsg: "HMSG", OpPoll: "POLL",
	OpAck: "ACK", OpNack: "NACK", OpReject: "REJECT", OpExtend: "EXTEND",
	OpTopicCreate: "TOPIC CREATE", OpTopicInfo: "TOPIC INFO", OpTopicList: "TOPIC LIST",
	OpTopicDelete: "TOPIC DELETE", OpGroupCreate: "GROUP CREATE", OpGroupInfo: "GROUP INFO",
	OpGroupList: "GROUP LIST", OpGroupDelete: "GROUP DELETE", OpTopicRequeue: "TOPIC REQUEUE",
}

// String returns the verb as written on the wire ("PUB", "TOPIC CREATE",
// "+OK"), or "Op(<n>)" for an unknown value.
func (o Op) String() string {
	if o < opCount {
		return opNames[o]
	}
	return "Op(" + string(wire.AppendUint(nil, uint64(o))) + ")"
}

// ParseOp returns the Op whose String is s (exact, upper case), for tools and
// test vectors. It returns OpInvalid when there is none.
func ParseOp(s string) Op {
	for o := OpInfo; o < opCount; o++ {
		if opNames[o] == s {
			return o
		}
	}
	return OpInvalid
}

// Management reports whether o is a TOPIC or GROUP verb.
func (o Op) Management() bool { return o >= OpTopicCreate && o <= OpGroupDelete }

// Fibril reports whether o is a Fibril extension verb that needs CONNECT with
// "fibril":1 (POLL, ACK, NACK, REJECT, EXTEND, TOPIC, GROUP).
func (o Op) Fibril() bool { return o >= OpPoll && o <= OpGroupDelete }

// Direction says which frames a Parser accepts.
type Direction uint8

const (
	// ClientToServer parses what a server reads: CONNECT PING PONG PUB HPUB
	// SUB UNSUB POLL ACK NACK REJECT EXTEND TOPIC GROUP.
	ClientToServer Direction = iota
	// ServerToClient parses what a client (SDK) reads: INFO PING PONG +OK
	// -ERR MSG HMSG.
	ServerToClient
)

// String returns "client->server" or "server->client".
func (d Direction) String() string {
	if d == ServerToClient {
		return "server->client"
	}
	return "client->server"
}

// Command is one parsed frame. The parser fills only the fields its Op uses
// and zeroes the rest. Every slice is borrowed: it points into the buffer
// passed to Parse (or into the parser) and is valid only until the Handler
// returns; copy what must outlive the call.
type Command struct {
	Op Op
	// Subject: PUB/HPUB/MSG/HMSG/SUB subject; POLL topic; the topic name of
	// TOPIC CREATE/INFO/DELETE and of GROUP verbs.
	Subject []byte
	// Reply: the reply-to of PUB/HPUB, the reply-to (or ack handle) of
	// MSG/HMSG; nil when absent.
	Reply []byte
	// Group: the queue group or durable group of SUB (nil when absent), the
	// group of POLL and GROUP CREATE/INFO/DELETE.
	Group []byte
	// Sid: the subscription id of SUB/UNSUB/MSG/HMSG ("0" for POLL deliveries).
	Sid []byte
	// Header: the header block of HPUB/HMSG, from "NATS/1.0" through the
	// empty line (CRLF CRLF) included.
	Header []byte
	// Payload: the body of PUB/HPUB/MSG/HMSG after the header block.
	Payload []byte
	// CRC is the CRC-32 (IEEE) of Header followed by Payload. The parser sets
	// it only in CRC mode, where it always computes it (also when the frame
	// carried "-"); 0 otherwise.
	CRC uint32
	// HasCRC reports that the frame carried an explicit checksum token (which
	// the parser verified against CRC). False for "-" and outside CRC mode.
	HasCRC bool
	// Max: UNSUB max-msgs, SUB max-inflight, POLL max; 0 when absent.
	Max int64
	// Millis: POLL wait-ms, NACK delay-ms, EXTEND ms; 0 when absent.
	Millis int64
	// Handles: the handles of ACK (one or more) and the one handle of NACK,
	// REJECT and EXTEND. Backed by the parser: valid until the Handler returns.
	Handles []Handle
	// Text: the text of -ERR without its quotes; the argument of +OK (rest of
	// the line, may be empty).
	Text []byte
	// JSON: the JSON of INFO and CONNECT, the optional JSON of TOPIC CREATE
	// and GROUP CREATE (rest of the line, trimmed; nil when absent).
	JSON []byte
}
