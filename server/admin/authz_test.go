package admin

import (
	"net/http"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/fibrilmq/fibril/server/access"
	"github.com/fibrilmq/fibril/server/broker"
)

// TestEveryEndpointIsGuarded walks the route table itself: an identity
// without any right or role gets 403 with a JSON error from every
// endpoint that names an action, and an unrestricted one from none.
func TestEveryEndpointIsGuarded(t *testing.T) {
	b := openBroker(t)
	if _, err := b.CreateTopic("t", broker.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	nobody := access.NewUser("nobody", access.RoleNone, 2, access.Permissions{
		Publish: access.Rule{Deny: []string{">"}}, Consume: access.Rule{Deny: []string{">"}}})
	s := startAdmin(t, Options{Broker: staticBroker(b), Authenticate: AnyAuth(TokenAuth("tok"),
		BasicAuth(bcryptChecker{"nobody": {hash: hash, id: nobody}}))})
	path := strings.NewReplacer("{name}", "t", "{group}", "g", "{p}", "0", "{seq}", "1", "{$}", "")
	// Open to any identity: the dashboard and the topic list (which shows
	// only what the caller may view). A new endpoint is guarded unless
	// added here.
	open := map[string]bool{"GET /api/topics": true, "GET /{$}": true, "GET /ui/": true}
	n := 0
	for _, e := range s.endpoints() {
		if (e.action == 0) != open[e.pattern] {
			t.Errorf("%s: action %d; only %v are open", e.pattern, e.action, open)
		}
		method, p, _ := strings.Cut(e.pattern, " ")
		p = path.Replace(p)
		if strings.HasSuffix(p, "/ui/") {
			p += "dashboard.js"
		}
		for _, as := range []string{"nobody", "token"} {
			req, err := http.NewRequest(method, s.URL()+p, strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if as == "token" {
				req.Header.Set("Authorization", "Bearer tok")
			} else {
				req.SetBasicAuth("nobody", "pw")
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			forbidden := res.StatusCode == http.StatusForbidden
			if want := as == "nobody" && e.action != 0; forbidden != want {
				t.Errorf("%s %s as %s: %d (action %d)", method, p, as, res.StatusCode, e.action)
			}
			if forbidden && res.Header.Get("Content-Type") != "application/json" {
				t.Errorf("%s %s: 403 without a JSON error", method, p)
			}
		}
		n++
	}
	if n < 14 {
		t.Fatalf("%d endpoints in the table", n)
	}
}
