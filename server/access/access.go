package access

import (
	"strconv"
	"strings"

	"github.com/fibrilmq/fibril/protocol"
)

// Rule is one allow/deny pair of subject filter lists.
type Rule struct {
	// Allow filters; empty allows every subject not denied.
	Allow []string `json:"allow"`
	// Deny filters; they win over Allow.
	Deny []string `json:"deny"`
}

// Permissions are a user's subject rights. The zero value allows every
// subject.
type Permissions struct {
	// Publish governs PUB/HPUB, the subjects a topic captures when it is
	// created, and dead-letter targets.
	Publish Rule `json:"publish"`
	// Consume governs SUB, POLL, durable push consumption, settling, and
	// reading a topic's messages over HTTP.
	Consume Rule `json:"consume"`
}

// Role is what an identity may do on the admin HTTP listener beyond its
// subject rights.
type Role string

const (
	// RoleNone (the default) sees the topics its subject rights cover and
	// reads the messages of those it may consume.
	RoleNone Role = ""
	// RoleMonitor is read-only: it also sees every topic's and group's
	// counters and /metrics (never payloads it may not consume).
	RoleMonitor Role = "monitor"
	// RoleAdmin also lists connections (users, addresses) and operates:
	// pause/resume, purge, requeue.
	RoleAdmin Role = "admin"
)

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == RoleNone || r == RoleMonitor || r == RoleAdmin }

// Identity is who a connection or an HTTP request authenticated as. Build
// one with NewUser or Unrestricted; its methods are safe for concurrent
// use. A nil *Identity is Unrestricted.
type Identity struct {
	// Name is the user name; empty for the token and for no auth.
	Name string
	// Role applies to the admin HTTP listener.
	Role Role
	// Principal names the identity in lease records: a handle may be
	// settled only by the identity it was delivered to (SPEC.md 9.2).
	Principal uint16
	// perms is nil for an identity with every subject right.
	perms *Permissions
}

// PrincipalUnrestricted is the principal of the token and of connections
// when auth is off; users have their own (NewUser).
const PrincipalUnrestricted uint16 = 1

// Unrestricted is the identity of the token, and of everyone when auth is
// off: every subject right and the admin role.
func Unrestricted() *Identity {
	return &Identity{Role: RoleAdmin, Principal: PrincipalUnrestricted}
}

// NewUser returns the identity of a configured user. principal must be
// unique among users and not PrincipalUnrestricted or 0.
func NewUser(name string, role Role, principal uint16, p Permissions) *Identity {
	return &Identity{Name: name, Role: role, Principal: principal, perms: &p}
}

// AllSubjects reports whether the identity has every subject right (the
// token, no auth, or a user without allow or deny lists), so callers may
// skip looking up what a decision would need.
func (id *Identity) AllSubjects() bool {
	if id == nil || id.perms == nil {
		return true
	}
	p := id.perms
	return len(p.Publish.Allow)+len(p.Publish.Deny)+len(p.Consume.Allow)+len(p.Consume.Deny) == 0
}

// Topic is what a topic decision needs: its name and capture filters.
type Topic struct {
	Name string
	// Subjects are the topic's filters; empty means [Name].
	Subjects []string
}

// subjects is every subject the topic stands for: its name and its filters.
// Rights over a topic are rights over each.
func (t Topic) subjects(yield func(string) bool) {
	if !yield(t.Name) {
		return
	}
	for _, f := range t.Subjects {
		if f != t.Name && !yield(f) {
			return
		}
	}
}

// permits applies r to a filter: some allow filter covers all of it and no
// deny filter shares a subject with it. For a literal subject that is
// "some allow filter matches it and no deny filter does".
func (r *Rule) permits(filter string) bool {
	for _, d := range r.Deny {
		if Overlap(d, filter) {
			return false
		}
	}
	if len(r.Allow) == 0 {
		return true
	}
	for _, a := range r.Allow {
		if Covers(a, filter) {
			return true
		}
	}
	return false
}

func (id *Identity) publishRule() *Rule {
	if id == nil || id.perms == nil {
		return nil
	}
	return &id.perms.Publish
}

func (id *Identity) consumeRule() *Rule {
	if id == nil || id.perms == nil {
		return nil
	}
	return &id.perms.Consume
}

func ruleOK(r *Rule, filter string) bool { return r == nil || r.permits(filter) }

// denied is the permission_denied error; what names the refused action in
// NATS's words ("Publish to", "Subscription to").
func denied(what, name string) error {
	return protocol.NewError(protocol.CodePermissionDenied, "for "+what+" "+strconv.Quote(name))
}

func reserved(what, name string) error {
	return protocol.NewError(protocol.CodeReservedSubject, what+" "+strconv.Quote(name))
}

func isReserved(s string) bool { return strings.HasPrefix(s, "$") }

// Publish decides a PUB/HPUB to a literal subject outside the "$" space
// (callers route ack handles first; any other "$" subject is
// reserved_subject).
func (id *Identity) Publish(subject string) error {
	if isReserved(subject) {
		return reserved("to", subject)
	}
	if !ruleOK(id.publishRule(), subject) {
		return denied("Publish to", subject)
	}
	return nil
}

// PublishPlain decides a publish from a NATS-mode connection, where a "$"
// subject other than an ack handle is a plain subject (fan-out only, as on
// a NATS server: SPEC.md section 6): the same publish rule, no reserved
// check.
func (id *Identity) PublishPlain(subject string) error {
	if !ruleOK(id.publishRule(), subject) {
		return denied("Publish to", subject)
	}
	return nil
}

// Subscribe decides a SUB filter (a plain subscription, or the name part
// of a durable SUB before its topic is looked up).
func (id *Identity) Subscribe(filter string) error {
	if !ruleOK(id.consumeRule(), filter) {
		return denied("Subscription to", filter)
	}
	return nil
}

// ConsumeTopic decides POLL, durable SUB, GROUP CREATE/DELETE and settling
// on t: consume rights over its name and every filter.
func (id *Identity) ConsumeTopic(t Topic) error {
	if s, ok := allOK(id.consumeRule(), t); !ok {
		return denied("Subscription to", s)
	}
	return nil
}

// PublishTopic reports whether the identity may publish every subject t
// stands for (its name and filters).
func (id *Identity) PublishTopic(t Topic) bool {
	_, ok := allOK(id.publishRule(), t)
	return ok
}

// allOK applies r to every subject of t; it returns the first refused.
func allOK(r *Rule, t Topic) (string, bool) {
	if r == nil {
		return "", true
	}
	for s := range t.subjects {
		if !r.permits(s) {
			return s, false
		}
	}
	return "", true
}

// SeeName is SeeTopic for a name not looked up yet: false means no topic
// of that name can be visible, so the answer must not say whether it
// exists.
func (id *Identity) SeeName(name string) bool {
	return ruleOK(id.publishRule(), name) || ruleOK(id.consumeRule(), name)
}

// SeeTopic decides TOPIC INFO, GROUP INFO, GROUP LIST and whether TOPIC
// LIST shows t: the identity may consume all of it or publish all of it.
func (id *Identity) SeeTopic(t Topic) bool {
	return id.ConsumeTopic(t) == nil || id.PublishTopic(t)
}

// CreateTopic decides TOPIC CREATE of t: no "$" name or filter (the
// server's alone), and both publish and consume rights over the name and
// every filter, so nobody captures subjects they could not use themselves.
func (id *Identity) CreateTopic(t Topic) error {
	for s := range t.subjects {
		if isReserved(s) {
			return reserved("topic", s)
		}
	}
	return id.ManageTopic(t)
}

// ManageTopic decides TOPIC DELETE of t (and the rights half of
// CreateTopic): publish and consume rights over its name and every filter.
// A "$DLQ." topic may be deleted by whoever has those rights over its name.
func (id *Identity) ManageTopic(t Topic) error {
	if s, ok := allOK(id.publishRule(), t); !ok {
		return denied("Publish to", s)
	}
	return id.ConsumeTopic(t)
}

// DeadLetter decides a group's dead_letter target on GROUP CREATE for group
// of topic: "" and "-" (none) and the server's default
// "$DLQ.<topic>.<group>" are allowed; any other "$" name is
// reserved_subject. An existing target (existing non-nil) needs publish
// rights over all of it; a missing one is created with the group, so it
// needs CreateTopic rights.
func (id *Identity) DeadLetter(topic, group, target string, existing *Topic) error {
	if target == "" || target == "-" || target == protocol.DeadLetterTopic(topic, group) {
		return nil
	}
	if isReserved(target) {
		return reserved("dead_letter", target)
	}
	if existing == nil {
		return id.CreateTopic(Topic{Name: target})
	}
	if s, ok := allOK(id.publishRule(), *existing); !ok {
		return denied("Publish to", s)
	}
	return nil
}
