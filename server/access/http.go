package access

// Action is something an admin HTTP endpoint does (SPEC.md 6.1, "Admin
// HTTP"). Each endpoint maps to one action.
type Action uint8

const (
	// ViewTopic: one topic's and its groups' counters and configuration
	// (GET /api/topics/{t}, .../groups/{g}); GET /api/topics lists only
	// the topics this allows.
	ViewTopic Action = iota + 1
	// ReadMessages: stored payloads (.../messages, .../messages/{seq}/history)
	// and the consumer-state events of a topic (.../events).
	ReadMessages
	// ViewMetrics: GET /metrics, and GET /api/cluster (the nodes, each
	// partition's leader and its followers' lag).
	ViewMetrics
	// ViewConnections: GET /api/connections, and which connection (user,
	// address) an event or history entry names.
	ViewConnections
	// Operate: POST pause, resume, purge, requeue.
	Operate
)

// Can decides action a; t is the topic it concerns (nil for ViewMetrics
// and ViewConnections).
//
//   - ViewTopic: the monitor or admin role, or SeeTopic.
//   - ReadMessages: ConsumeTopic, whatever the role (payloads are data).
//   - ViewMetrics: the monitor or admin role.
//   - ViewConnections, Operate: the admin role.
func (id *Identity) Can(a Action, t *Topic) bool {
	role := RoleAdmin
	if id != nil {
		role = id.Role
	}
	monitor := role == RoleMonitor || role == RoleAdmin
	switch a {
	case ViewTopic:
		return t != nil && (monitor || id.SeeTopic(*t))
	case ReadMessages:
		return t != nil && id.ConsumeTopic(*t) == nil
	case ViewMetrics:
		return monitor
	case ViewConnections, Operate:
		return role == RoleAdmin
	}
	return false
}
