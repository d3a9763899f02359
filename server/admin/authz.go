package admin

import (
	"net/http"

	"github.com/fibrilmq/fibril/server/access"
	"github.com/fibrilmq/fibril/server/broker"
)

// Authorization of each endpoint (SPEC.md 6.1, "Admin HTTP"): guard
// (api.go) checks the endpoint's action before its handler runs, by the
// topic's name; a topic's handler checks it again on the topic as found
// (topicFor). A refusal is 403 with a JSON error.

// accessTopic is what a permission decision needs of t.
func accessTopic(t *broker.Topic) *access.Topic {
	return &access.Topic{Name: string(t.Name()), Subjects: t.Subjects()}
}

// topicFor finds the topic {name} for action a: 403 when the caller may
// not do a on a topic of that name (before the lookup, so a refusal does
// not tell whether it exists), 404 when there is none, 403 when the topic
// as found reaches beyond the caller's rights.
func topicFor(w http.ResponseWriter, r *http.Request, b *broker.Broker, a access.Action) (*broker.Topic, bool) {
	id, name := identityOf(r), r.PathValue("name")
	if !id.Can(a, &access.Topic{Name: name}) {
		writeError(w, http.StatusForbidden, "permission denied for topic "+name)
		return nil, false
	}
	t, ok := b.Topic(broker.TopicName(name))
	if !ok {
		writeError(w, http.StatusNotFound, "no topic "+name)
		return nil, false
	}
	if !id.Can(a, accessTopic(t)) {
		writeError(w, http.StatusForbidden, "permission denied for topic "+name)
		return nil, false
	}
	return t, true
}
