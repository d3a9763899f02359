package server

import (
	"strings"
	"testing"
	"time"
)

// waitTopicMsgs polls TOPIC INFO name until it counts n messages.
func waitTopicMsgs(t *testing.T, w *wireConn, name string, n int) {
	t.Helper()
	want := `"msgs":` + string(rune('0'+n)) + `,`
	deadline := time.Now().Add(5 * time.Second)
	for {
		w.send("TOPIC INFO " + name + "\r\n")
		if l := w.expect(`^\+OK `); strings.Contains(l, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %d messages", name, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// deadLetters publishes subjects to topic orders (orders.>) as user w and
// rejects each into $DLQ.orders.g.
func deadLetters(t *testing.T, pub, w *wireConn, subjects ...string) {
	t.Helper()
	for _, s := range subjects {
		pub.send("PUB " + s + " 1\r\nx\r\n")
		pub.expect(`^\+OK 0:\d+$`)
	}
	for range subjects {
		w.send("POLL orders g 1 5000\r\n")
		h := w.expectDelivery(`^MSG orders\.\S+ 0 `, "x")
		w.expect(`^\+OK 1$`)
		w.send("REJECT " + h + "\r\n")
		w.expect(`^\+OK$`)
	}
}

// TestTopicRequeue: TOPIC REQUEUE moves dead letters back to their
// original subjects, all of them or those a filter or an offset range
// picks, answers with the count, and refuses a bad request clearly.
func TestTopicRequeue(t *testing.T) {
	s := startDurable(t, nil)
	w := fibrilConn(t, s, "")
	w.send(`TOPIC CREATE orders {"subjects":["orders.>"]}` + "\r\nGROUP CREATE orders g\r\n")
	w.expect(`^\+OK `)
	w.expect(`^\+OK `)
	deadLetters(t, w, w, "orders.eu.1", "orders.us.1", "orders.us.2")
	waitTopicMsgs(t, w, "$DLQ.orders.g", 3)
	w.send(`TOPIC REQUEUE $DLQ.orders.g {"filter":["orders.eu.>"]}` + "\r\n")
	w.expect(`^\+OK \{"topic":"\$DLQ\.orders\.g","requeued":1\}$`)
	w.send("POLL orders g 10 5000\r\n")
	h := w.expectDelivery(`^MSG orders\.eu\.1 0 `, "x")
	w.expect(`^\+OK 1$`)
	w.send("ACK " + h + "\r\n")
	w.expect(`^\+OK$`)
	w.send(`TOPIC REQUEUE $DLQ.orders.g {"from_seq":3,"to_seq":3}` + "\r\n")
	w.expect(`^\+OK \{"topic":"\$DLQ\.orders\.g","requeued":1\}$`)
	w.send("TOPIC REQUEUE $DLQ.orders.g\r\n") // the rest: orders.us.1 alone
	w.expect(`^\+OK \{"topic":"\$DLQ\.orders\.g","requeued":1\}$`)
	w.send("POLL orders g 10 5000\r\n")
	w.expectDelivery(`^MSG orders\.us\.\d 0 `, "x")
	w.expectDelivery(`^MSG orders\.us\.\d 0 `, "x")
	w.expect(`^\+OK 2$`)
	for _, tc := range []struct{ line, want string }{
		{`TOPIC REQUEUE $DLQ.orders.g {"max":0}`, `^-ERR 'invalid_config `},
		{`TOPIC REQUEUE $DLQ.orders.g {"max":100001}`, `^-ERR 'invalid_config `},
		{`TOPIC REQUEUE $DLQ.orders.g {"from_seq":5,"to_seq":4}`, `^-ERR 'invalid_config `},
		{`TOPIC REQUEUE $DLQ.orders.g {"filter":["a..b"]}`, `^-ERR 'invalid_config `},
		{`TOPIC REQUEUE $DLQ.orders.g {"bogus":1}`, `^-ERR 'invalid_json `},
		{`TOPIC REQUEUE nosuch`, `^-ERR 'unknown_topic `},
		{`TOPIC REQUEUE`, `^-ERR 'invalid_args `},
	} {
		w.send(tc.line + "\r\n")
		w.expect(tc.want)
	}
}

// TestTopicRequeueNeedsRights: TOPIC REQUEUE needs the rights TOPIC
// DELETE needs over the dead-letter topic, and moves a message only to a
// subject the user may publish to, or to a named topic ("to") it may
// publish all of: a refusal stops it there, and the message stays.
func TestTopicRequeueNeedsRights(t *testing.T) {
	s := startPermServer(t)
	root := loginAs(t, s, "root")
	root.send(`TOPIC CREATE orders {"subjects":["orders","orders.>"]}` + "\r\nGROUP CREATE orders g\r\n")
	root.expect(`^\+OK `)
	root.expect(`^\+OK `)
	owner := loginAs(t, s, "orders")
	deadLetters(t, root, owner, "orders.secret")
	waitTopicMsgs(t, root, "$DLQ.orders.g", 1)
	thief := loginAs(t, s, "thief")
	thief.send("TOPIC REQUEUE $DLQ.orders.g\r\n")
	thief.expect(deniedRe)
	owner.send("TOPIC REQUEUE $DLQ.orders.g\r\n") // orders.secret is on its publish deny list
	owner.expect(deniedRe)
	waitTopicMsgs(t, root, "$DLQ.orders.g", 1)
	root.send("TOPIC CREATE billing\r\n")
	root.expect(`^\+OK `)
	owner.send(`TOPIC REQUEUE $DLQ.orders.g {"to":"billing"}` + "\r\n") // no publish rights over billing
	owner.expect(deniedRe)
	root.send(`TOPIC REQUEUE $DLQ.orders.g {"to":"billing"}` + "\r\n")
	root.expect(`^\+OK \{"topic":"\$DLQ\.orders\.g","requeued":1\}$`)
	root.send("POLL billing b 1 5000\r\n")
	root.expectDelivery(`^MSG orders\.secret 0 `, "x") // under its original subject
	root.expect(`^\+OK 1$`)
	deadLetters(t, root, owner, "orders.secret")
	waitTopicMsgs(t, root, "$DLQ.orders.g", 1)
	root.send("TOPIC REQUEUE $DLQ.orders.g\r\n")
	root.expect(`^\+OK \{"topic":"\$DLQ\.orders\.g","requeued":1\}$`)
}
