package admin

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/fibrilmq/fibril/server/broker"
)

// FuzzAPI: any topic name, group name and requeue body gets a JSON answer
// with a sensible status, never a panic.
func FuzzAPI(f *testing.F) {
	o := broker.DefaultOptions()
	o.SegmentSize, o.EventSegmentSize = 1<<20, 1<<20
	b, err := broker.Open(f.TempDir(), o)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { b.Close() })
	if _, err = b.CreateTopic("orders", broker.TopicConfig{}); err != nil {
		f.Fatal(err)
	}
	s, err := New(Options{Addr: "127.0.0.1:0", Broker: staticBroker(b)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	h := s.Handler()
	for _, seed := range [][3]string{
		{"orders", "g", `{"max":1}`},
		{"$DLQ.orders.g", "", `{}`},
		{"a/b", "..", `[`},
		{"", "", ""},
		{"%", "\x00", `{"max":-1}`},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, topic, group, body string) {
		for _, req := range []*http.Request{
			httptest.NewRequest("GET", "/api/topics/"+url.PathEscape(topic), nil),
			httptest.NewRequest("GET", "/api/topics/"+url.PathEscape(topic)+"/groups/"+url.PathEscape(group), nil),
			func() *http.Request {
				r := httptest.NewRequest("POST", "/api/topics/"+url.PathEscape(topic)+"/requeue", strings.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				return r
			}(),
		} {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			switch w.Code {
			case 200, 400, 404, 405, 301, 307, 308:
			default:
				t.Fatalf("%s %s: status %d: %s", req.Method, req.URL, w.Code, w.Body)
			}
			if w.Code == 200 || w.Code == 400 {
				var v any
				if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
					t.Fatalf("%s %s: %d with a body that is not JSON: %q", req.Method, req.URL, w.Code, w.Body)
				}
			}
		}
	})
}
