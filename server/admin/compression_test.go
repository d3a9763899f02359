package admin

import (
	"testing"

	"github.com/fibrilmq/fibril/server/broker"
)

// TestTopicStatsShowCompression: the topic JSON of the admin API carries the
// topic's compression setting, with the default filled in.
func TestTopicStatsShowCompression(t *testing.T) {
	b := openBroker(t)
	s := startAdmin(t, Options{Broker: staticBroker(b)})
	for name, c := range map[broker.TopicName]broker.Compression{"archive": broker.CompressionZstd, "plain": ""} {
		if _, err := b.CreateTopic(name, broker.TopicConfig{Compression: c}); err != nil {
			t.Fatal(err)
		}
	}
	var raw map[string]any
	getJSON(t, s.URL()+"/api/topics/archive", &raw)
	if cfg, _ := raw["config"].(map[string]any); cfg["compression"] != "zstd" {
		t.Fatalf("archive config %v, want compression zstd", raw["config"])
	}
	getJSON(t, s.URL()+"/api/topics/plain", &raw)
	if cfg, _ := raw["config"].(map[string]any); cfg["compression"] != "none" {
		t.Fatalf("plain config %v, want compression none", raw["config"])
	}
}
