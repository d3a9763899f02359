package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fibrilmq/fibril/protocol"
)

// TestTopicCompressionOnTheWire: TOPIC CREATE takes "compression" (SPEC.md
// 10.1), TOPIC CREATE and TOPIC INFO show it with the default filled in, an
// unknown codec is invalid_config, and creating again is idempotent only
// for the same codec.
func TestTopicCompressionOnTheWire(t *testing.T) {
	s := startDurable(t, nil)
	w := fibrilConn(t, s, "")
	cfgOf := func(line string) protocol.TopicConfig {
		t.Helper()
		var in protocol.TopicInfo
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "+OK ")), &in); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		return in.Config
	}

	w.send(`TOPIC CREATE zs {"compression":"s2"}` + "\r\n")
	if c := cfgOf(w.expect(`^\+OK \{`)); c.Compression != "s2" {
		t.Fatalf("TOPIC CREATE answer compression = %q, want s2", c.Compression)
	}
	w.send("TOPIC INFO zs\r\n")
	if c := cfgOf(w.expect(`^\+OK \{`)); c.Compression != "s2" {
		t.Fatalf("TOPIC INFO compression = %q, want s2", c.Compression)
	}
	w.send("TOPIC CREATE plain\r\n")
	if c := cfgOf(w.expect(`^\+OK \{`)); c.Compression != "none" {
		t.Fatalf("default compression = %q, want none", c.Compression)
	}

	w.send(`TOPIC CREATE zs {"compression":"s2"}` + "\r\n")
	w.expect(`^\+OK \{"name":"zs"`)
	w.send(`TOPIC CREATE zs {"compression":"zstd"}` + "\r\n")
	w.expect(`^-ERR 'topic_exists `)
	w.send(`TOPIC CREATE plain {"compression":"none"}` + "\r\n")
	w.expect(`^\+OK \{"name":"plain"`)

	for _, js := range []string{`{"compression":"lz4"}`, `{"compression":"S2"}`} {
		w.send("TOPIC CREATE zbad " + js + "\r\n")
		w.expect(`^-ERR 'invalid_config .*compression`)
	}
	w.send(`TOPIC CREATE zbad {"compression":2}` + "\r\n")
	w.expect(`^-ERR 'invalid_json `)
	w.send("TOPIC INFO zbad\r\n")
	w.expect(`^-ERR 'unknown_topic `)
}
