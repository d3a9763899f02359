package protocol

import "github.com/fibrilmq/fibril/wire"

// This file implements SPEC.md "SUB", "UNSUB", "POLL", "ACK", "NACK",
// "REJECT", "EXTEND" and "Management": the commands without a body. Their
// errors are never fatal: the line is skipped.

func (p *Parser) parseNoArgs(rest []byte, op Op) *Error {
	if tok, _ := nextToken(rest); len(tok) != 0 {
		return &Error{Code: CodeInvalidArgs, Detail: op.String() + " takes no arguments"}
	}
	p.cmd.Op = op
	return nil
}

// parseSub: SUB <subject> [group] <sid> [max-inflight].
func (p *Parser) parseSub(rest []byte) *Error {
	n := p.split(rest)
	if n < 2 || n > 4 {
		return argCount(OpSub, n, "2 to 4")
	}
	c := &p.cmd
	c.Op = OpSub
	c.Subject = p.args[0]
	if n == 2 {
		c.Sid = p.args[1]
	} else {
		c.Group = p.args[1]
		c.Sid = p.args[2]
	}
	if code := checkSubject(c.Subject, true); code != "" {
		return &Error{Code: code, Detail: "subject " + quoteDetail(c.Subject)}
	}
	if c.Group != nil && !validToken(c.Group) {
		return &Error{Code: CodeInvalidArgs, Detail: "group " + quoteDetail(c.Group)}
	}
	if !validToken(c.Sid) || len(c.Sid) == 1 && c.Sid[0] == '0' {
		return &Error{Code: CodeInvalidArgs, Detail: "sid " + quoteDetail(c.Sid) + " (sid 0 is reserved for POLL)"}
	}
	if n == 4 {
		v, err := number(p.args[3], MaxCount, "max-inflight")
		if err != nil {
			return err
		}
		c.Max = v
	}
	return nil
}

// parseUnsub: UNSUB <sid> [max-msgs].
func (p *Parser) parseUnsub(rest []byte) *Error {
	n := p.split(rest)
	if n < 1 || n > 2 {
		return argCount(OpUnsub, n, "1 or 2")
	}
	c := &p.cmd
	c.Op = OpUnsub
	c.Sid = p.args[0]
	if !validToken(c.Sid) {
		return &Error{Code: CodeInvalidArgs, Detail: "sid " + quoteDetail(c.Sid)}
	}
	if n == 2 {
		v, err := number(p.args[1], MaxCount, "max-msgs")
		if err != nil {
			return err
		}
		c.Max = v
	}
	return nil
}

// parsePoll: POLL <topic> <group> <max> [wait-ms].
func (p *Parser) parsePoll(rest []byte) *Error {
	n := p.split(rest)
	if n < 3 || n > 4 {
		return argCount(OpPoll, n, "3 or 4")
	}
	c := &p.cmd
	c.Op = OpPoll
	c.Subject = p.args[0]
	c.Group = p.args[1]
	if code := checkSubject(c.Subject, false); code != "" {
		return &Error{Code: code, Detail: "topic " + quoteDetail(c.Subject)}
	}
	if !validGroupName(c.Group) {
		return &Error{Code: CodeInvalidName, Detail: quoteDetail(c.Group)}
	}
	v, err := number(p.args[2], MaxCount, "max")
	if err != nil {
		return err
	}
	if v == 0 {
		return &Error{Code: CodeInvalidArgs, Detail: "POLL max must be at least 1"}
	}
	c.Max = v
	if n == 4 {
		if c.Millis, err = number(p.args[3], MaxMillis, "wait-ms"); err != nil {
			return err
		}
	}
	return nil
}

// parseAck: ACK <handle> [<handle> ...]. The handles live in p.handles,
// which grows once and is reused, so steady-state ACKs do not allocate.
func (p *Parser) parseAck(rest []byte) *Error {
	p.handles = p.handles[:0]
	for {
		tok, r := nextToken(rest)
		if len(tok) == 0 {
			break
		}
		h, ok := parseHandle(tok)
		if !ok {
			return &Error{Code: CodeInvalidHandle, Detail: quoteDetail(tok)}
		}
		p.handles = append(p.handles, h)
		rest = r
	}
	if len(p.handles) == 0 {
		return argCount(OpAck, 0, "at least 1")
	}
	p.cmd.Op = OpAck
	p.cmd.Handles = p.handles
	return nil
}

// parseHandleCmd: NACK <handle> [delay-ms], REJECT <handle>, EXTEND <handle> [ms].
func (p *Parser) parseHandleCmd(rest []byte, op Op) *Error {
	n := p.split(rest)
	max := 2
	if op == OpReject {
		max = 1
	}
	if n < 1 || n > max {
		if max == 1 {
			return argCount(op, n, "1")
		}
		return argCount(op, n, "1 or 2")
	}
	h, ok := parseHandle(p.args[0])
	if !ok {
		return &Error{Code: CodeInvalidHandle, Detail: quoteDetail(p.args[0])}
	}
	if n == 2 {
		name := "delay-ms"
		if op == OpExtend {
			name = "ms"
		}
		v, err := number(p.args[1], MaxMillis, name)
		if err != nil {
			return err
		}
		p.cmd.Millis = v
	}
	p.handles = append(p.handles[:0], h)
	p.cmd.Op = op
	p.cmd.Handles = p.handles
	return nil
}

// parseTopic: TOPIC CREATE <name> [json] | INFO <name> | LIST | DELETE
// <name> | REQUEUE <name> [json].
func (p *Parser) parseTopic(rest []byte) *Error {
	sub, rest := nextToken(rest)
	var op Op
	switch {
	case eqFold(sub, "CREATE"):
		op = OpTopicCreate
	case eqFold(sub, "INFO"):
		op = OpTopicInfo
	case eqFold(sub, "LIST"):
		op = OpTopicList
		if tok, _ := nextToken(rest); len(tok) != 0 {
			return argCount(op, 1, "0")
		}
		p.cmd.Op = op
		return nil
	case eqFold(sub, "DELETE"):
		op = OpTopicDelete
	case eqFold(sub, "REQUEUE"):
		op = OpTopicRequeue
	default:
		return &Error{Code: CodeInvalidArgs, Detail: "TOPIC needs CREATE, INFO, LIST, DELETE or REQUEUE"}
	}
	name, rest := nextToken(rest)
	if len(name) == 0 {
		return argCount(op, 0, "1")
	}
	if code := checkSubject(name, false); code != "" {
		return &Error{Code: code, Detail: "topic " + quoteDetail(name)}
	}
	js := trimSpace(rest)
	if op != OpTopicCreate && op != OpTopicRequeue && len(js) != 0 {
		return argCount(op, 2, "1")
	}
	p.cmd.Op = op
	p.cmd.Subject = name
	if len(js) != 0 {
		p.cmd.JSON = js
	}
	return nil
}

// parseGroup: GROUP CREATE <topic> <group> [json] | INFO <topic> <group> |
// LIST <topic> | DELETE <topic> <group>.
func (p *Parser) parseGroup(rest []byte) *Error {
	sub, rest := nextToken(rest)
	var op Op
	switch {
	case eqFold(sub, "CREATE"):
		op = OpGroupCreate
	case eqFold(sub, "INFO"):
		op = OpGroupInfo
	case eqFold(sub, "LIST"):
		op = OpGroupList
	case eqFold(sub, "DELETE"):
		op = OpGroupDelete
	default:
		return &Error{Code: CodeInvalidArgs, Detail: "GROUP needs CREATE, INFO, LIST or DELETE"}
	}
	topic, rest := nextToken(rest)
	if len(topic) == 0 {
		return argCount(op, 0, "at least 1")
	}
	if code := checkSubject(topic, false); code != "" {
		return &Error{Code: code, Detail: "topic " + quoteDetail(topic)}
	}
	var group []byte
	if op != OpGroupList {
		group, rest = nextToken(rest)
		if len(group) == 0 {
			return argCount(op, 1, "2")
		}
		if !validGroupName(group) {
			return &Error{Code: CodeInvalidName, Detail: quoteDetail(group)}
		}
	}
	js := trimSpace(rest)
	if op != OpGroupCreate && len(js) != 0 {
		return &Error{Code: CodeInvalidArgs, Detail: op.String() + " has too many arguments"}
	}
	p.cmd.Op = op
	p.cmd.Subject = topic
	p.cmd.Group = group
	if len(js) != 0 {
		p.cmd.JSON = js
	}
	return nil
}

// number parses a count or millisecond argument.
func number(tok []byte, max uint64, name string) (int64, *Error) {
	v, st := parseUint(tok, max)
	switch st {
	case numInvalid:
		return 0, &Error{Code: CodeInvalidNumber, Detail: name + " " + quoteDetail(tok)}
	case numOverflow:
		return 0, &Error{Code: CodeNumberOverflow, Detail: name + " " + quoteDetail(tok) + ", limit " + string(wire.AppendUint(nil, max))}
	}
	return int64(v), nil
}

func argCount(op Op, n int, want string) *Error {
	return &Error{Code: CodeInvalidArgs, Detail: op.String() + " has " + itoa(n) + " arguments, want " + want}
}
