package server

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/admin"
)

// httpGet fetches url with an optional bearer token.
func httpGet(t *testing.T, url, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, body
}

func metric(text, name string) (float64, bool) {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

// TestAdminListenerWiredToServer: HTTPListen starts the admin listener with
// the server's token auth, the live engine, the connection list with
// traffic counters, and the fsync histograms fed by the engine.
func TestAdminListenerWiredToServer(t *testing.T) {
	s := startServer(t, func(o *Options) {
		durableFiles(o)
		o.HTTPListen = "127.0.0.1:0"
		o.Token = "s3cret"
	})
	if s.HTTPAddr() == nil || s.Broker() == nil {
		t.Fatalf("HTTPAddr %v Broker %v after Ready", s.HTTPAddr(), s.Broker())
	}
	base := "http://" + s.HTTPAddr().String()
	if code, _ := httpGet(t, base+"/readyz", ""); code != 200 {
		t.Fatalf("readyz: %d", code)
	}
	if code, _ := httpGet(t, base+"/api/topics", ""); code != http.StatusUnauthorized {
		t.Fatalf("api without token: %d", code)
	}
	if code, _ := httpGet(t, base+"/api/topics", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("api with a wrong token: %d", code)
	}

	w := dialInfo(t, s)
	w.send(`CONNECT {"fibril":1,"auth_token":"s3cret","name":"probe","lang":"raw"}` + "\r\n")
	w.expect(`^\+OK$`)
	w.send("SUB probe.x 1\r\n")
	w.expect(`^\+OK$`)
	w.send("TOPIC CREATE jobs\r\nPUB jobs 5\r\nhello\r\n")
	w.expect(`^\+OK \{`)
	w.expect(`^\+OK 0:1$`)

	var list struct{ Connections []admin.ConnInfo }
	waitFor(t, 5*time.Second, "the connection in /api/connections", func() bool {
		code, body := httpGet(t, base+"/api/connections", "s3cret")
		if code != 200 || json.Unmarshal(body, &list) != nil || len(list.Connections) != 1 {
			return false
		}
		c := list.Connections[0]
		return c.Name == "probe" && c.Lang == "raw" && c.Fibril && c.Subs == 1 && c.InMsgs == 1 && c.InBytes > 0 && c.OutBytes > 0
	})
	waitFor(t, 5*time.Second, "server counters and fsync histograms in /metrics", func() bool {
		code, body := httpGet(t, base+"/metrics", "s3cret")
		text := string(body)
		conns, ok1 := metric(text, "fibril_server_connections_total")
		in, ok2 := metric(text, "fibril_server_in_msgs_total")
		syncs, ok3 := metric(text, "fibril_fsync_seconds_count")
		batch, ok4 := metric(text, "fibril_group_commit_batch_messages_sum")
		return code == 200 && ok1 && conns == 1 && ok2 && in == 1 && ok3 && syncs >= 1 && ok4 && batch >= 1
	})
	var topic admin.TopicStats
	code, body := httpGet(t, base+"/api/topics/jobs", "s3cret")
	if code != 200 || json.Unmarshal(body, &topic) != nil || topic.Published != 1 {
		t.Fatalf("topic jobs: %d %s", code, body)
	}
}

func TestHTTPListenValidatedAndBusy(t *testing.T) {
	if _, err := New(testOptions(t, func(o *Options) { o.HTTPListen = "nonsense" })); err == nil {
		t.Fatal("bad HTTPListen accepted")
	}
	a := startServer(t, func(o *Options) { o.HTTPListen = "127.0.0.1:0" })
	b, err := New(testOptions(t, func(o *Options) { o.HTTPListen = a.HTTPAddr().String() }))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Run(t.Context()); err == nil {
		t.Fatal("Run with a busy admin address succeeded")
	}
	if b.Broker() != nil {
		t.Fatal("Broker() not nil after a failed Run")
	}
}
