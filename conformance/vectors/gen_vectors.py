#!/usr/bin/env python3
"""Writes the Fibril wire-protocol test vectors (see README.md).

Usage: python3 gen_vectors.py [output-dir]   (default: this script's directory)

The expectations here are written by hand from SPEC.md, not produced by any
implementation, so every implementation (Go, Python, TypeScript) is checked
against the spec.
"""
import json
import os
import sys
import zlib

C2S, S2C = "client_to_server", "server_to_client"
HELLO_CRC = "%08x" % zlib.crc32(b"hello")


def crc(*parts):
    data = b"".join(p.encode("latin-1") if isinstance(p, str) else p for p in parts)
    return "%08x" % zlib.crc32(data)


def cmd(op, **kw):
    ev = {"op": op}
    ev.update({k: v for k, v in kw.items() if v is not None})
    return ev


def body(op, subject, payload, reply=None, sid=None, header=None, crc_mode=False, has_crc=True):
    ev = cmd(op, subject=subject, sid=sid, reply=reply, header=header, payload=payload)
    if crc_mode:
        ev["crc"] = crc(header or "", payload)
        ev["has_crc"] = has_crc
    return ev


def err(code, fatal):
    return {"error": code, "fatal": fatal}


def vec(name, wire, events, direction=C2S, crc_mode=False, canonical=False,
        limits=None, consumed=None, crc_after_connect=False, description=None):
    v = {"name": name}
    if description:
        v["description"] = description
    v["direction"] = direction
    v["crc"] = crc_mode
    if crc_after_connect:
        v["crc_after_connect"] = True
    if limits:
        v["limits"] = limits
    v["wire"] = wire
    v["canonical"] = canonical
    v["events"] = events
    v["consumed"] = len(wire.encode("latin-1")) if consumed is None else consumed
    return v


HDR = "NATS/1.0\r\nFibril-Key: cust-42\r\n\r\n"  # 33 bytes
H1 = "$F.1.2.0.5.1"
H2 = "$F.18446744073709551615.7.4294967295.18446744073709551615.4294967295"


def client_to_server():
    v = []
    # PUB
    v.append(vec("pub/basic", "PUB orders 5\r\nhello\r\n", [body("PUB", "orders", "hello")], canonical=True))
    v.append(vec("pub/reply", "PUB orders _INBOX.a.1 5\r\nhello\r\n",
                 [body("PUB", "orders", "hello", reply="_INBOX.a.1")], canonical=True))
    v.append(vec("pub/empty-payload", "PUB a.b 0\r\n\r\n", [body("PUB", "a.b", "")], canonical=True))
    v.append(vec("pub/lowercase-verb-tabs-lf", "pub\torders \t 5\nhello\n", [body("PUB", "orders", "hello")],
                 description="verbs are case-insensitive, tabs separate, bare LF accepted after line and body"))
    v.append(vec("pub/mixed-case-verb", "PuB x 1\r\n!\r\n", [body("PUB", "x", "!")]))
    v.append(vec("pub/payload-with-crlf", "PUB x 4\r\n\r\n\r\n\r\n", [body("PUB", "x", "\r\n\r\n")], canonical=True))
    v.append(vec("pub/binary-payload", "PUB x 4\r\n\x00\xff\x80\x7f\r\n", [body("PUB", "x", "\x00\xff\x80\x7f")], canonical=True))
    v.append(vec("pub/leading-zero-size", "PUB x 005\r\nhello\r\n", [body("PUB", "x", "hello")]))
    v.append(vec("pub/trailing-spaces", "PUB x 5   \r\nhello\r\n", [body("PUB", "x", "hello")]))
    v.append(vec("pub/leading-spaces", "  PUB x 5\r\nhello\r\n", [body("PUB", "x", "hello")]))
    v.append(vec("pub/utf8-subject", "PUB caf\xc3\xa9.x 1\r\na\r\n", [body("PUB", "caf\xc3\xa9.x", "a")], canonical=True))
    v.append(vec("pub/handle-subject", "PUB %s 4\r\n+ACK\r\n" % H1, [body("PUB", H1, "+ACK")], canonical=True,
                 description="settle by publishing to the ack handle"))
    v.append(vec("pub/dollar-subject-parses", "PUB $SYS.x 1\r\na\r\n", [body("PUB", "$SYS.x", "a")], canonical=True,
                 description="reserved_subject is the server's decision, the parser accepts"))
    # HPUB
    v.append(vec("hpub/basic", "HPUB orders 33 38\r\n%shello\r\n" % HDR,
                 [body("HPUB", "orders", "hello", header=HDR)], canonical=True))
    v.append(vec("hpub/reply", "HPUB orders r.1 33 38\r\n%shello\r\n" % HDR,
                 [body("HPUB", "orders", "hello", reply="r.1", header=HDR)], canonical=True))
    v.append(vec("hpub/empty-payload", "HPUB x 12 12\r\nNATS/1.0\r\n\r\n\r\n",
                 [body("HPUB", "x", "", header="NATS/1.0\r\n\r\n")], canonical=True))
    v.append(vec("hpub/status-line", "HPUB x 16 16\r\nNATS/1.0 503\r\n\r\n\r\n",
                 [body("HPUB", "x", "", header="NATS/1.0 503\r\n\r\n")], canonical=True))
    # A header size of 0 is a frame without headers (nats.js sends it for an
    # empty header set); NATS delivers it as MSG.
    v.append(vec("hpub/empty-header-block", "HPUB s 0 4\r\nabcd\r\n",
                 [body("HPUB", "s", "abcd", header="")], canonical=True))
    # SUB / UNSUB
    v.append(vec("sub/plain", "SUB orders.* 1\r\n", [cmd("SUB", subject="orders.*", sid="1")], canonical=True))
    v.append(vec("sub/queue", "SUB orders billing 2\r\n", [cmd("SUB", subject="orders", group="billing", sid="2")], canonical=True))
    v.append(vec("sub/max-inflight", "SUB orders billing 2 16\r\n",
                 [cmd("SUB", subject="orders", group="billing", sid="2", max=16)], canonical=True))
    v.append(vec("sub/full-wildcard", "SUB > 9\r\n", [cmd("SUB", subject=">", sid="9")], canonical=True))
    v.append(vec("sub/nats-go-double-space", "SUB foo  1\r\n", [cmd("SUB", subject="foo", sid="1")],
                 description="nats.go writes an empty queue as two spaces"))
    v.append(vec("sub/alnum-sid", "SUB a.*.c q sidA\r\n", [cmd("SUB", subject="a.*.c", group="q", sid="sidA")], canonical=True))
    v.append(vec("unsub/basic", "UNSUB 1\r\n", [cmd("UNSUB", sid="1")], canonical=True))
    v.append(vec("unsub/max", "UNSUB 1 10\r\n", [cmd("UNSUB", sid="1", max=10)], canonical=True))
    # PING / PONG / CONNECT
    v.append(vec("ping", "PING\r\n", [cmd("PING")], canonical=True))
    v.append(vec("pong", "PONG\r\n", [cmd("PONG")], canonical=True))
    v.append(vec("ping/lowercase-lf", "ping\n", [cmd("PING")]))
    v.append(vec("connect/fibril", 'CONNECT {"fibril":1,"crc":true}\r\n', [cmd("CONNECT", json='{"fibril":1,"crc":true}')], canonical=True))
    v.append(vec("connect/json-with-spaces", 'CONNECT { "verbose" : false , "name": "a b" }  \r\n',
                 [cmd("CONNECT", json='{ "verbose" : false , "name": "a b" }')]))
    # POLL
    v.append(vec("poll/basic", "POLL orders billing 10\r\n", [cmd("POLL", subject="orders", group="billing", max=10)], canonical=True))
    v.append(vec("poll/wait", "POLL orders billing 10 5000\r\n",
                 [cmd("POLL", subject="orders", group="billing", max=10, millis=5000)], canonical=True))
    v.append(vec("poll/dlq", "POLL $DLQ.orders.billing ops 1\r\n",
                 [cmd("POLL", subject="$DLQ.orders.billing", group="ops", max=1)], canonical=True))
    v.append(vec("poll/max-limits", "POLL t g 2147483647 4294967295\r\n",
                 [cmd("POLL", subject="t", group="g", max=2147483647, millis=4294967295)], canonical=True))
    # ACK family
    v.append(vec("ack/one", "ACK %s\r\n" % H1, [cmd("ACK", handles=[H1])], canonical=True))
    v.append(vec("ack/many", "ACK %s $F.1.2.0.6.1 $F.1.2.3.7.2\r\n" % H1,
                 [cmd("ACK", handles=[H1, "$F.1.2.0.6.1", "$F.1.2.3.7.2"])], canonical=True))
    v.append(vec("ack/max-handle", "ACK %s\r\n" % H2, [cmd("ACK", handles=[H2])], canonical=True))
    v.append(vec("nack/basic", "NACK %s\r\n" % H1, [cmd("NACK", handles=[H1])], canonical=True))
    v.append(vec("nack/delay", "NACK %s 1000\r\n" % H1, [cmd("NACK", handles=[H1], millis=1000)], canonical=True))
    v.append(vec("reject", "REJECT %s\r\n" % H1, [cmd("REJECT", handles=[H1])], canonical=True))
    v.append(vec("extend/basic", "EXTEND %s\r\n" % H1, [cmd("EXTEND", handles=[H1])], canonical=True))
    v.append(vec("extend/ms", "EXTEND %s 60000\r\n" % H1, [cmd("EXTEND", handles=[H1], millis=60000)], canonical=True))
    # management
    v.append(vec("topic/create", "TOPIC CREATE orders\r\n", [cmd("TOPIC CREATE", subject="orders")], canonical=True))
    v.append(vec("topic/create-json", 'TOPIC CREATE orders {"partitions": 4, "subjects": ["orders.>"]}\r\n',
                 [cmd("TOPIC CREATE", subject="orders", json='{"partitions": 4, "subjects": ["orders.>"]}')], canonical=True))
    v.append(vec("topic/create-lowercase", "topic create orders {}\r\n", [cmd("TOPIC CREATE", subject="orders", json="{}")]))
    v.append(vec("topic/info", "TOPIC INFO orders\r\n", [cmd("TOPIC INFO", subject="orders")], canonical=True))
    v.append(vec("topic/list", "TOPIC LIST\r\n", [cmd("TOPIC LIST")], canonical=True))
    v.append(vec("topic/delete", "TOPIC DELETE orders\r\n", [cmd("TOPIC DELETE", subject="orders")], canonical=True))
    v.append(vec("topic/requeue", "TOPIC REQUEUE $DLQ.orders.billing\r\n", [cmd("TOPIC REQUEUE", subject="$DLQ.orders.billing")], canonical=True))
    v.append(vec("topic/requeue-json", 'TOPIC REQUEUE $DLQ.orders.billing {"filter":["orders.eu.>"],"max":500}\r\n',
                 [cmd("TOPIC REQUEUE", subject="$DLQ.orders.billing", json='{"filter":["orders.eu.>"],"max":500}')], canonical=True))
    v.append(vec("group/create", "GROUP CREATE orders billing\r\n", [cmd("GROUP CREATE", subject="orders", group="billing")], canonical=True))
    v.append(vec("group/create-json", 'GROUP CREATE orders billing {"lease_ms":5000,"max_deliveries":2}\r\n',
                 [cmd("GROUP CREATE", subject="orders", group="billing", json='{"lease_ms":5000,"max_deliveries":2}')], canonical=True))
    v.append(vec("group/create-start-seq", 'GROUP CREATE orders replay {"start":"seq","start_seq":1000}\r\n',
                 [cmd("GROUP CREATE", subject="orders", group="replay", json='{"start":"seq","start_seq":1000}')], canonical=True))
    v.append(vec("group/create-backoff", 'GROUP CREATE orders retry {"backoff_ms":[1000,5000,30000]}\r\n',
                 [cmd("GROUP CREATE", subject="orders", group="retry", json='{"backoff_ms":[1000,5000,30000]}')], canonical=True))
    v.append(vec("group/create-ordered", 'GROUP CREATE orders fifo {"ordered":"partition"}\r\n',
                 [cmd("GROUP CREATE", subject="orders", group="fifo", json='{"ordered":"partition"}')], canonical=True))
    v.append(vec("group/create-ordered-key", 'GROUP CREATE orders per-customer {"ordered":"key"}\r\n',
                 [cmd("GROUP CREATE", subject="orders", group="per-customer", json='{"ordered":"key"}')], canonical=True))
    v.append(vec("group/create-on-expiry", 'GROUP CREATE orders late {"on_expiry":"dead_letter"}\r\n',
                 [cmd("GROUP CREATE", subject="orders", group="late", json='{"on_expiry":"dead_letter"}')], canonical=True))
    v.append(vec("group/create-filter", 'GROUP CREATE orders eu {"filter":["orders.eu.>"]}\r\n',
                 [cmd("GROUP CREATE", subject="orders", group="eu", json='{"filter":["orders.eu.>"]}')], canonical=True))
    v.append(vec("group/create-start-time", 'GROUP CREATE orders since {"start":"time","start_time":"2026-12-03T09:00:00Z"}\r\n',
                 [cmd("GROUP CREATE", subject="orders", group="since", json='{"start":"time","start_time":"2026-12-03T09:00:00Z"}')], canonical=True))
    v.append(vec("group/info", "GROUP INFO orders billing\r\n", [cmd("GROUP INFO", subject="orders", group="billing")], canonical=True))
    v.append(vec("group/list", "GROUP LIST orders\r\n", [cmd("GROUP LIST", subject="orders")], canonical=True))
    v.append(vec("group/delete", "GROUP DELETE orders billing\r\n", [cmd("GROUP DELETE", subject="orders", group="billing")], canonical=True))
    v.append(vec("group/create-dash-name", "Group Create orders.eu bill-ing_2\r\n",
                 [cmd("GROUP CREATE", subject="orders.eu", group="bill-ing_2")]))
    return v


def server_to_client():
    v = []
    info = '{"server_id":"FBR1","proto":1,"max_payload":1048576,"fibril":1,"crc":true}'
    v.append(vec("info", "INFO %s\r\n" % info, [cmd("INFO", json=info)], direction=S2C, canonical=True))
    v.append(vec("ok/bare", "+OK\r\n", [cmd("+OK")], direction=S2C, canonical=True))
    v.append(vec("ok/confirm", "+OK 0:17\r\n", [cmd("+OK", text="0:17")], direction=S2C, canonical=True))
    v.append(vec("ok/confirm-duplicate", "+OK 0:17 duplicate\r\n", [cmd("+OK", text="0:17 duplicate")], direction=S2C, canonical=True))
    v.append(vec("ok/not-stored", "+OK -\r\n", [cmd("+OK", text="-")], direction=S2C, canonical=True))
    v.append(vec("ok/poll-done", "+OK 2\r\n", [cmd("+OK", text="2")], direction=S2C, canonical=True))
    v.append(vec("ok/json", '+OK {"topics":["orders"]}\r\n', [cmd("+OK", text='{"topics":["orders"]}')], direction=S2C, canonical=True))
    v.append(vec("ok/lowercase", "+ok\r\n", [cmd("+OK")], direction=S2C))
    v.append(vec("err/fibril", "-ERR 'crc_mismatch payload checksum does not match'\r\n",
                 [cmd("-ERR", text="crc_mismatch payload checksum does not match")], direction=S2C, canonical=True))
    v.append(vec("err/nats", "-ERR 'Unknown Protocol Operation'\r\n",
                 [cmd("-ERR", text="Unknown Protocol Operation")], direction=S2C, canonical=True))
    v.append(vec("err/unquoted", "-ERR Stale Connection\r\n", [cmd("-ERR", text="Stale Connection")], direction=S2C))
    v.append(vec("ping", "PING\r\n", [cmd("PING")], direction=S2C, canonical=True))
    v.append(vec("pong", "PONG\r\n", [cmd("PONG")], direction=S2C, canonical=True))
    v.append(vec("msg/basic", "MSG orders 1 5\r\nhello\r\n", [body("MSG", "orders", "hello", sid="1")], direction=S2C, canonical=True))
    v.append(vec("msg/reply", "MSG orders 1 _INBOX.x 5\r\nhello\r\n",
                 [body("MSG", "orders", "hello", sid="1", reply="_INBOX.x")], direction=S2C, canonical=True))
    v.append(vec("msg/handle", "MSG orders 0 %s 5\r\nhello\r\n" % H1,
                 [body("MSG", "orders", "hello", sid="0", reply=H1)], direction=S2C, canonical=True))
    v.append(vec("msg/empty", "MSG a 1 0\r\n\r\n", [body("MSG", "a", "", sid="1")], direction=S2C, canonical=True))
    v.append(vec("hmsg/basic", "HMSG orders 1 33 38\r\n%shello\r\n" % HDR,
                 [body("HMSG", "orders", "hello", sid="1", header=HDR)], direction=S2C, canonical=True))
    v.append(vec("hmsg/reply", "HMSG orders 1 %s 33 38\r\n%shello\r\n" % (H1, HDR),
                 [body("HMSG", "orders", "hello", sid="1", reply=H1, header=HDR)], direction=S2C, canonical=True))
    dl = ("NATS/1.0\r\nFibril-Reason: max_deliveries\r\nFibril-Subject: orders\r\nFibril-Partition: 0\r\n"
          "Fibril-Seq: 2\r\nFibril-Deliveries: 2\r\n\r\n")
    v.append(vec("hmsg/dead-letter-crc", "HMSG $DLQ.orders.billing 0 $F.2.2.0.1.1 125 130 %s\r\n%sworld\r\n" % (crc(dl, "world"), dl),
                 [body("HMSG", "$DLQ.orders.billing", "world", sid="0", reply="$F.2.2.0.1.1", header=dl, crc_mode=True)],
                 direction=S2C, crc_mode=True, canonical=True, description="the dead letter of the SPEC telnet session"))
    v.append(vec("poll-answer", "MSG orders 0 $F.1.1.0.1.1 5 3610a686\r\nhello\r\nMSG orders 0 $F.1.1.0.2.1 5 3a771143\r\nworld\r\n+OK 2\r\n",
                 [body("MSG", "orders", "hello", sid="0", reply="$F.1.1.0.1.1", crc_mode=True),
                  body("MSG", "orders", "world", sid="0", reply="$F.1.1.0.2.1", crc_mode=True),
                  cmd("+OK", text="2")], direction=S2C, crc_mode=True, canonical=True))
    return v


def crc_vectors():
    v = []
    v.append(vec("crc/pub-given", "PUB orders 5 %s\r\nhello\r\n" % HELLO_CRC,
                 [body("PUB", "orders", "hello", crc_mode=True)], crc_mode=True, canonical=True))
    v.append(vec("crc/pub-skip", "PUB orders 5 -\r\nhello\r\n",
                 [body("PUB", "orders", "hello", crc_mode=True, has_crc=False)], crc_mode=True, canonical=True))
    v.append(vec("crc/pub-reply", "PUB orders r 5 %s\r\nhello\r\n" % HELLO_CRC,
                 [body("PUB", "orders", "hello", reply="r", crc_mode=True)], crc_mode=True, canonical=True))
    v.append(vec("crc/pub-empty", "PUB x 0 00000000\r\n\r\n", [body("PUB", "x", "", crc_mode=True)], crc_mode=True, canonical=True))
    v.append(vec("crc/hpub", "HPUB orders 33 38 %s\r\n%shello\r\n" % (crc(HDR, "hello"), HDR),
                 [body("HPUB", "orders", "hello", header=HDR, crc_mode=True)], crc_mode=True, canonical=True,
                 description="the checksum covers header block and payload"))
    v.append(vec("crc/hpub-reply-skip", "HPUB orders r 33 38 -\r\n%shello\r\n" % HDR,
                 [body("HPUB", "orders", "hello", reply="r", header=HDR, crc_mode=True, has_crc=False)], crc_mode=True, canonical=True))
    v.append(vec("crc/mismatch", "PUB orders 5 00000000\r\nhello\r\n", [err("crc_mismatch", False)], crc_mode=True))
    v.append(vec("crc/mismatch-then-continue", "PUB orders 5 00000001\r\nhello\r\nPING\r\n",
                 [err("crc_mismatch", False), cmd("PING")], crc_mode=True,
                 description="a mismatch skips that frame only"))
    v.append(vec("crc/hpub-mismatch", "HPUB orders 33 38 %s\r\n%shello\r\n" % (HELLO_CRC, HDR),
                 [err("crc_mismatch", False)], crc_mode=True, description="the CRC of the payload alone is wrong for HPUB"))
    v.append(vec("crc/uppercase-hex", "PUB orders 5 %s\r\nhello\r\n" % HELLO_CRC.upper(), [err("invalid_crc_token", False)], crc_mode=True))
    v.append(vec("crc/short-hex", "PUB orders 5 3610a68\r\nhello\r\n", [err("invalid_crc_token", False)], crc_mode=True))
    v.append(vec("crc/long-hex", "PUB orders 5 3610a6860\r\nhello\r\n", [err("invalid_crc_token", False)], crc_mode=True))
    v.append(vec("crc/non-hex", "PUB orders 5 3610a68g\r\nhello\r\n", [err("invalid_crc_token", False)], crc_mode=True))
    v.append(vec("crc/missing-token", "PUB orders 5\r\nhello\r\n", [err("bad_frame", True)], crc_mode=True, consumed=0,
                 description="in CRC mode PUB needs 3 or 4 tokens"))
    v.append(vec("crc/off-extra-token", "PUB orders 5 %s\r\nhello\r\n" % HELLO_CRC, [err("bad_frame", True)], consumed=0,
                 description="outside CRC mode the checksum reads as a size after a reply-to: not a number"))
    v.append(vec("crc/msg", "MSG orders 1 5 %s\r\nhello\r\n" % HELLO_CRC,
                 [body("MSG", "orders", "hello", sid="1", crc_mode=True)], direction=S2C, crc_mode=True, canonical=True))
    v.append(vec("crc/msg-dash-refused", "MSG orders 1 5 -\r\nhello\r\n", [err("invalid_crc_token", False)],
                 direction=S2C, crc_mode=True, description="the server always sends the real checksum"))
    v.append(vec("crc/msg-mismatch", "MSG orders 1 5 3a771143\r\nhello\r\n", [err("crc_mismatch", False)], direction=S2C, crc_mode=True))
    v.append(vec("crc/hmsg", "HMSG orders 1 r 33 38 %s\r\n%shello\r\n" % (crc(HDR, "hello"), HDR),
                 [body("HMSG", "orders", "hello", sid="1", reply="r", header=HDR, crc_mode=True)], direction=S2C, crc_mode=True, canonical=True))
    v.append(vec("crc/switch-after-connect", 'CONNECT {"crc":true}\r\nPUB orders 5 -\r\nhello\r\n',
                 [cmd("CONNECT", json='{"crc":true}'), body("PUB", "orders", "hello", crc_mode=True, has_crc=False)],
                 crc_after_connect=True, description="the owner flips CRC mode inside the handler; the next frame in the same buffer uses it"))
    v.append(vec("crc/non-body-verbs-unchanged", "SUB a 1\r\nPING\r\n", [cmd("SUB", subject="a", sid="1"), cmd("PING")],
                 crc_mode=True, canonical=True))
    return v


def invalid():
    v = []
    e = lambda name, wire, code, fatal, consumed=None, **kw: v.append(
        vec(name, wire, [err(code, fatal)], consumed=(0 if fatal and consumed is None else consumed), **kw))
    e("unknown/verb", "FOO bar\r\n", "unknown_op", False)
    v.append(vec("unknown/msg-from-client", "MSG a 1 1\r\nx\r\n", [err("unknown_op", False), err("unknown_op", False)],
                 description="MSG is server to client; the line is skipped, the body then reads as a line of its own"))
    e("unknown/info-from-client", "INFO {}\r\n", "unknown_op", False)
    v.append(vec("unknown/pub-from-server", "PUB a 1\r\nx\r\n", [err("unknown_op", False), err("unknown_op", False)],
                 direction=S2C))
    e("unknown/connect-from-server", "CONNECT {}\r\n", "unknown_op", False, direction=S2C)
    e("control-line/too-long-no-lf", "PUB " + "a" * 70, "max_control_line", True,
      limits={"max_control_line": 64}, description="fails before the line end arrives")
    e("control-line/too-long", "SUB " + "a" * 61 + " 1\r\n", "max_control_line", True, limits={"max_control_line": 64})
    v.append(vec("control-line/at-limit", "SUB " + "a" * 58 + " 1\r\n", [cmd("SUB", subject="a" * 58, sid="1")],
                 limits={"max_control_line": 64}, canonical=True, description="64 bytes without CRLF is allowed"))
    v.append(vec("control-line/connect-larger-limit", "CONNECT {\"name\":\"%s\"}\r\n" % ("n" * 100),
                 [cmd("CONNECT", json="{\"name\":\"%s\"}" % ("n" * 100))], limits={"max_control_line": 64}, canonical=True,
                 description="CONNECT lines have their own (1 MiB) limit"))
    v.append(vec("control-line/topic-create-larger-limit", 'TOPIC CREATE t {"subjects":["%s"]}\r\n' % ("s" * 100),
                 [cmd("TOPIC CREATE", subject="t", json='{"subjects":["%s"]}' % ("s" * 100))], limits={"max_control_line": 64},
                 canonical=True, description="TOPIC and GROUP lines carry JSON: the JSON line limit applies"))
    v.append(vec("control-line/ok-answer-larger-limit", '+OK {"topics":["%s"]}\r\n' % ("t" * 100),
                 [cmd("+OK", text='{"topics":["%s"]}' % ("t" * 100))], direction=S2C, limits={"max_control_line": 64},
                 canonical=True, description="management answers (TOPIC LIST) may be long"))
    e("control-line/err-not-larger", "-ERR '" + "x" * 70 + "'\r\n", "max_control_line", True, direction=S2C,
      limits={"max_control_line": 64})
    e("payload/too-big", "PUB a 17\r\n", "max_payload", True, limits={"max_payload": 16},
      description="checked on the control line, before the payload arrives")
    v.append(vec("payload/at-limit", "PUB a 16\r\n0123456789abcdef\r\n", [body("PUB", "a", "0123456789abcdef")],
                 limits={"max_payload": 16}, canonical=True))
    e("payload/overflow", "PUB a 99999999999999999999999\r\n", "max_payload", True)
    e("payload/hpub-total-too-big", "HPUB a 12 17\r\n", "max_payload", True, limits={"max_payload": 16})
    e("payload/msg-too-big", "MSG a 1 17\r\n", "max_payload", True, limits={"max_payload": 16}, direction=S2C)
    e("frame/pub-no-args", "PUB\r\n", "bad_frame", True)
    e("frame/pub-one-arg", "PUB a\r\n", "bad_frame", True)
    e("frame/pub-too-many", "PUB a b c 5\r\nhello\r\n", "bad_frame", True)
    e("frame/pub-size-not-number", "PUB a b\r\n", "bad_frame", True)
    e("frame/pub-negative-size", "PUB a -1\r\n", "bad_frame", True)
    e("frame/pub-plus-size", "PUB a +1\r\nx\r\n", "bad_frame", True)
    e("frame/pub-hex-size", "PUB a 0x10\r\n", "bad_frame", True)
    e("frame/pub-bad-terminator", "PUB a 5\r\nhelloXX", "bad_frame", True)
    e("frame/pub-short-body", "PUB a 3\r\nhello\r\n", "bad_frame", True, description="body longer than announced")
    e("frame/pub-cr-not-lf", "PUB a 5\r\nhello\rX", "bad_frame", True)
    e("frame/hpub-header-gt-total", "HPUB a 20 10\r\n", "bad_frame", True)
    e("frame/hpub-header-not-number", "HPUB a x 10\r\n", "bad_frame", True)
    e("frame/hpub-missing-total", "HPUB a 12\r\n", "bad_frame", True)
    e("frame/msg-missing-sid", "MSG a 5\r\nhello\r\n", "bad_frame", True, direction=S2C)
    e("frame/hmsg-too-many", "HMSG a 1 r x 12 12\r\n", "bad_frame", True, direction=S2C)
    e("subject/pub-empty-token", "PUB a..b 1\r\nx\r\n", "invalid_subject", False)
    e("subject/pub-leading-dot", "PUB .a 1\r\nx\r\n", "invalid_subject", False)
    e("subject/pub-trailing-dot", "PUB a. 1\r\nx\r\n", "invalid_subject", False)
    e("subject/pub-control-char", "PUB a\x01b 1\r\nx\r\n", "invalid_subject", False)
    e("subject/pub-del-char", "PUB a\x7f 1\r\nx\r\n", "invalid_subject", False)
    e("subject/pub-invalid-utf8", "PUB pay.\xff 1\r\nx\r\n", "invalid_subject", False,
      description="bytes above 0x7f must be valid UTF-8: names round-trip byte for byte")
    e("subject/pub-overlong-utf8", "PUB a\xc0\xaf 1\r\nx\r\n", "invalid_subject", False)
    e("subject/sub-truncated-utf8", "SUB a.\xe2\x82 1\r\n", "invalid_subject", False)
    e("subject/pub-star", "PUB a.* 1\r\nx\r\n", "wildcard_not_allowed", False)
    e("subject/pub-gt", "PUB a.> 1\r\nx\r\n", "wildcard_not_allowed", False)
    e("subject/pub-reply-wildcard", "PUB a r.* 1\r\nx\r\n", "wildcard_not_allowed", False)
    e("subject/pub-reply-bad", "PUB a r..x 1\r\nx\r\n", "invalid_subject", False)
    e("subject/hpub-star", "HPUB * 12 12\r\nNATS/1.0\r\n\r\n\r\n", "wildcard_not_allowed", False)
    e("subject/sub-partial-wildcard", "SUB a* 1\r\n", "invalid_subject", False)
    e("subject/sub-gt-not-last", "SUB a.>.b 1\r\n", "invalid_subject", False)
    e("subject/sub-gt-in-token", "SUB a.b> 1\r\n", "invalid_subject", False)
    e("subject/sub-empty-token", "SUB a..* 1\r\n", "invalid_subject", False)
    e("subject/msg-wildcard", "MSG a.* 1 1\r\nx\r\n", "wildcard_not_allowed", False, direction=S2C)
    e("subject/poll-wildcard", "POLL orders.* g 1\r\n", "wildcard_not_allowed", False)
    e("subject/topic-create-wildcard", "TOPIC CREATE orders.>\r\n", "wildcard_not_allowed", False)
    e("subject/group-list-bad-topic", "GROUP LIST a..b\r\n", "invalid_subject", False)
    e("header/no-prefix", "HPUB a 12 12\r\nHTTP/1.0\r\n\r\n\r\n", "invalid_header", False)
    e("header/no-blank-line", "HPUB a 10 10\r\nNATS/1.0\r\n\r\n", "invalid_header", False)
    e("header/too-short", "HPUB a 3 5\r\nhello\r\n", "invalid_header", False)
    e("header/bad-after-prefix", "HPUB a 13 13\r\nNATS/1.0X\r\n\r\n\r\n", "invalid_header", False)
    e("args/sub-one", "SUB a\r\n", "invalid_args", False)
    e("args/sub-five", "SUB a q 1 2 3\r\n", "invalid_args", False)
    e("args/sub-sid-zero", "SUB a 0\r\n", "invalid_args", False)
    e("args/unsub-none", "UNSUB\r\n", "invalid_args", False)
    e("args/unsub-three", "UNSUB 1 2 3\r\n", "invalid_args", False)
    e("args/ping-arg", "PING x\r\n", "invalid_args", False)
    e("args/poll-two", "POLL a g\r\n", "invalid_args", False)
    e("args/poll-max-zero", "POLL a g 0\r\n", "invalid_args", False)
    e("args/ack-none", "ACK\r\n", "invalid_args", False)
    e("args/reject-two", "REJECT %s 5\r\n" % H1, "invalid_args", False)
    e("args/nack-three", "NACK %s 5 6\r\n" % H1, "invalid_args", False)
    e("args/topic-no-sub", "TOPIC\r\n", "invalid_args", False)
    e("args/topic-bad-sub", "TOPIC RENAME a b\r\n", "invalid_args", False)
    e("args/topic-create-no-name", "TOPIC CREATE\r\n", "invalid_args", False)
    e("args/topic-info-extra", "TOPIC INFO a b\r\n", "invalid_args", False)
    e("args/topic-list-extra", "TOPIC LIST a\r\n", "invalid_args", False)
    e("args/group-create-no-group", "GROUP CREATE orders\r\n", "invalid_args", False)
    e("args/group-list-extra", "GROUP LIST orders billing\r\n", "invalid_args", False)
    e("args/info-no-json", "INFO\r\n", "invalid_args", False, direction=S2C)
    e("number/sub-max-inflight", "SUB a q 1 x\r\n", "invalid_number", False)
    e("number/unsub-max", "UNSUB 1 -5\r\n", "invalid_number", False)
    e("number/poll-max", "POLL a g ten\r\n", "invalid_number", False)
    e("number/nack-delay", "NACK %s 1.5\r\n" % H1, "invalid_number", False)
    e("overflow/poll-max", "POLL a g 2147483648\r\n", "number_overflow", False)
    e("overflow/poll-wait", "POLL a g 1 4294967296\r\n", "number_overflow", False)
    e("overflow/unsub-max", "UNSUB 1 99999999999999999999999\r\n", "number_overflow", False)
    e("overflow/extend-ms", "EXTEND %s 4294967296\r\n" % H1, "number_overflow", False)
    e("overflow/sub-max-inflight", "SUB a q 1 2147483648\r\n", "number_overflow", False)
    e("name/poll-group-dot", "POLL a g.x 1\r\n", "invalid_name", False)
    e("name/group-create-star", "GROUP CREATE a * \r\n", "invalid_name", False)
    e("name/group-too-long", "GROUP INFO a %s\r\n" % ("g" * 256), "invalid_name", False)
    e("handle/ack-bad", "ACK $F.1.2.3\r\n", "invalid_handle", False)
    e("handle/ack-second-bad", "ACK %s $F.1.2.0.0.1\r\n" % H1, "invalid_handle", False, description="seq 0 is out of range")
    e("handle/nack-leading-zero", "NACK $F.01.2.0.5.1\r\n", "invalid_handle", False)
    e("handle/extend-attempt-overflow", "EXTEND $F.1.2.0.5.4294967296\r\n", "invalid_handle", False)
    e("handle/reject-not-handle", "REJECT orders\r\n", "invalid_handle", False)
    e("connect/no-json", "CONNECT\r\n", "invalid_connect", True)
    e("connect/spaces-only", "CONNECT   \r\n", "invalid_connect", True)
    # streams of several frames, errors in the middle, partial frames
    v.append(vec("stream/many", "PING\r\nPUB a 1\r\nx\r\nSUB a 1\r\nPONG\r\n",
                 [cmd("PING"), body("PUB", "a", "x"), cmd("SUB", subject="a", sid="1"), cmd("PONG")], canonical=True))
    v.append(vec("stream/empty-lines-ignored", "\r\n\r\n  \r\nPING\r\n\n", [cmd("PING")]))
    v.append(vec("stream/error-then-continue", "SUB a..b 1\r\nSUB a 2\r\n",
                 [err("invalid_subject", False), cmd("SUB", subject="a", sid="2")]))
    v.append(vec("stream/fatal-stops", "PING\r\nPUB a x\r\nPING\r\n", [cmd("PING"), err("bad_frame", True)],
                 consumed=len("PING\r\n"), description="a fatal error leaves the rest unconsumed"))
    v.append(vec("stream/partial-line", "PING\r\nPUB a 5", [cmd("PING")], consumed=6,
                 description="an incomplete line waits for more bytes"))
    v.append(vec("stream/partial-body", "PUB a 5\r\nhel", [], consumed=0))
    v.append(vec("stream/partial-terminator", "PUB a 5\r\nhello\r", [], consumed=0))
    v.append(vec("stream/unknown-op-then-continue", "FOO\r\nPING\r\n", [err("unknown_op", False), cmd("PING")]))
    return v


def handles():
    ok = lambda w, t, g, p, s, a: {"wire": w, "handle": {"topic": t, "group": g, "partition": p, "seq": s, "attempt": a}}
    bad = lambda w, why: {"wire": w, "error": "invalid_handle", "description": why}
    return [
        ok("$F.1.2.0.5.1", "1", "2", "0", "5", "1"),
        ok("$F.10.20.3.400.2", "10", "20", "3", "400", "2"),
        ok(H2, "18446744073709551615", "7", "4294967295", "18446744073709551615", "4294967295"),
        bad("$F.0.2.0.5.1", "topic id 0"),
        bad("$F.1.0.0.5.1", "group id 0"),
        bad("$F.1.2.0.0.1", "seq 0"),
        bad("$F.1.2.0.5.0", "attempt 0"),
        bad("$F.1.2.00.5.1", "leading zero"),
        bad("$F.1.2.0.5", "five numbers missing one"),
        bad("$F.1.2.0.5.1.6", "seven tokens"),
        bad("$F.1.2.0.5.1.", "trailing dot"),
        bad("$F.1.2.0.5.a", "not a number"),
        bad("$F.1.2.4294967296.5.1", "partition overflows 32 bits"),
        bad("$F.18446744073709551616.2.0.5.1", "topic id overflows 64 bits"),
        bad("$G.1.2.0.5.1", "wrong prefix"),
        bad("F.1.2.0.5.1", "no $"),
        bad("$F.1.2.-0.5.1", "sign"),
        bad("", "empty"),
    ]


def subjects():
    ok = lambda s, w: {"subject": s, "wildcards": w}
    bad = lambda s, w, c: {"subject": s, "wildcards": w, "error": c}
    return [
        ok("a", False), ok("a.b.c", False), ok("$DLQ.orders.billing", False), ok("_INBOX.x.y", False),
        ok("a.*", True), ok("*", True), ok(">", True), ok("a.*.>", True), ok("caf\xc3\xa9", False),
        ok("a-b_c:d", False),
        bad("", False, "invalid_subject"), bad("a..b", False, "invalid_subject"), bad(".a", True, "invalid_subject"),
        bad("a.", True, "invalid_subject"), bad("a*", True, "invalid_subject"), bad("a.>.b", True, "invalid_subject"),
        bad("a b", True, "invalid_subject"), bad("a\tb", False, "invalid_subject"), bad("a\x00", False, "invalid_subject"),
        bad("a.*", False, "wildcard_not_allowed"), bad(">", False, "wildcard_not_allowed"),
        bad("a.b>", True, "invalid_subject"),
    ]


def ack_bodies():
    ok = lambda b, k, d=0: {"body": b, "kind": k, "delay_ns": d}
    bad = lambda b: {"body": b, "error": "invalid_ack"}
    return [
        ok("", "ack"), ok("+ACK", "ack"), ok(" +ACK\r\n", "ack"), ok("-NAK", "nak"),
        ok('-NAK {"delay":5000000000}', "nak", 5000000000), ok('-NAK { "delay" : 1 }', "nak", 1),
        ok("+WPI", "progress"), ok("+TERM", "term"), ok("+TERM bad input", "term"),
        bad("ACK"), bad("+ack"), bad("-NAK {\"delay\":-1}"), bad("-NAK {\"wait\":1}"), bad("-NAK x"), bad("hello"),
    ]


def confirms():
    ok = lambda t, p, q: {"text": t, "stored": True, "partition": p, "seq": q}
    dup = lambda t, p, q: {"text": t, "stored": True, "partition": p, "seq": q, "duplicate": True}
    return [
        ok("0:1", 0, "1"), ok("3:17", 3, "17"), ok(" 4294967295:18446744073709551615 ", 4294967295, "18446744073709551615"),
        dup("0:1 duplicate", 0, "1"), dup("3:17  duplicate ", 3, "17"),
        {"text": "-", "stored": False},
        {"text": "0:1 dup", "error": "invalid_args"}, {"text": "0:1 duplicated", "error": "invalid_args"},
        {"text": "- duplicate", "error": "invalid_args"}, {"text": "duplicate", "error": "invalid_args"},
        {"text": "", "error": "invalid_args"}, {"text": "1", "error": "invalid_args"}, {"text": ":1", "error": "invalid_args"},
        {"text": "1:", "error": "invalid_args"}, {"text": "4294967296:1", "error": "invalid_args"}, {"text": "a:1", "error": "invalid_args"},
    ]


def err_texts():
    e = lambda t, c, d="": {"text": t, "code": c, "detail": d}
    return [
        e("crc_mismatch payload checksum does not match", "crc_mismatch"),
        e("crc_mismatch payload checksum does not match: got 00000000, computed 3610a686", "crc_mismatch",
          "got 00000000, computed 3610a686"),
        e("stale_handle ack handle is superseded by a later delivery", "stale_handle"),
        e("unknown_op unknown protocol operation: \"FOO\"", "unknown_op", "\"FOO\""),
        e("'queue_full server is busy'", "queue_full"),
        e("Unknown Protocol Operation", "unknown_op"),
        e("Maximum Payload Violation", "max_payload"),
        e("Maximum Control Line Exceeded", "max_control_line"),
        e("Authorization Violation", "auth_violation"),
        e("authorization violation", "auth_violation", ""),
        e("Stale Connection", "stale_connection"),
        e("Slow Consumer", "slow_consumer"),
        e("Invalid Subject", "invalid_subject"),
        e("Invalid Publish Subject", "wildcard_not_allowed"),
        e("Permissions Violation for Publish to \"orders\"", "permission_denied", "for Publish to \"orders\""),
        e("maximum connections exceeded", "max_connections"),
        e("future_code something new", "future_code", "something new"),
        e("Something Else Entirely", "unknown", "Something Else Entirely"),
    ]


OUT_DIR = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))


def write(name, description, vectors, key="vectors"):
    with open(os.path.join(OUT_DIR, name), "w", encoding="utf-8") as f:
        json.dump({"description": description, key: vectors}, f, indent=1, ensure_ascii=True)
        f.write("\n")
    return len(vectors)


if __name__ == "__main__":
    n = 0
    n += write("client_to_server.json", "Valid client-to-server frames (SPEC.md sections 7, 8, 10).", client_to_server())
    n += write("server_to_client.json", "Valid server-to-client frames (SPEC.md section 7).", server_to_client())
    n += write("crc.json", "CRC mode (SPEC.md section 5).", crc_vectors())
    n += write("invalid.json", "Invalid frames, limits and streams (SPEC.md sections 13, 14).", invalid())
    n += write("handles.json", "Ack handle syntax (SPEC.md section 9.1).", handles())
    n += write("subjects.json", "Subject syntax (SPEC.md section 6).", subjects())
    n += write("ack_bodies.json", "Settle bodies published to a handle (SPEC.md section 9.3).", ack_bodies())
    n += write("confirms.json", "Texts of +OK answering a publish (SPEC.md section 7.5).", confirms())
    n += write("err_texts.json", "-ERR texts and the code a client maps them to (SPEC.md section 7.8).", err_texts())
    print(n, "vectors")
