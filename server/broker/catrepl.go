package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// A replicated catalog (Options.Catalog): the brokers of a cluster hold
// the same topics and groups, with the same ids, because every change is
// made by applying the same ordered list of changes. A broker's
// CreateTopic, DeleteTopic, Topic.Group, Topic.DeleteGroup, Group.Pause
// and Group.Resume encode the change (catOp) and hand it to the
// CatalogLog, which orders it with every broker's changes and has each
// broker apply it (ApplyCatalog) in that order; the caller gets what the
// apply on its own broker returned.
//
// Applying is deterministic: ids come from the catalog's counters (no
// directory scan), a group takes the counter's id in one record, and
// each apply ends with a record carrying its index (CatalogIndex), so a
// broker that crashed mid-apply applies that change again, with the
// same ids, and never one it finished. An apply that fails for a reason
// of this broker's own (a disk error) is not marked: ApplyCatalog
// returns it as its error and the caller must stop applying rather than
// go on with a catalog the others do not share.
//
// The broker knows nothing of how the log is replicated.

// CatalogLog orders catalog changes across brokers (Options.Catalog).
type CatalogLog interface {
	// Propose orders op after every change proposed before it and
	// returns once this broker applied it, with what ApplyCatalog
	// returned for it (CatalogResult.Value and .Err). An error of its
	// own (a timeout, no quorum) leaves the outcome unknown.
	Propose(op []byte) (any, error)
}

// CatalogResult is what applying one change gave: the topic or group
// made (Value) or why the change was refused (Err), alike on every
// broker.
type CatalogResult struct {
	Value any
	Err   error
}

// catOp is one catalog change as a CatalogLog carries it (JSON).
type catOp struct {
	Kind        string       `json:"kind"`
	Topic       TopicName    `json:"topic"`
	Group       GroupName    `json:"group,omitempty"`
	TopicConfig *TopicConfig `json:"topic_config,omitempty"`
	GroupConfig *GroupConfig `json:"group_config,omitempty"`
	// Placement is a created topic's holders per partition (placement.go).
	Placement [][]string `json:"placement,omitempty"`
}

const (
	opCreateTopic = "create_topic"
	opDeleteTopic = "delete_topic"
	opGroup       = "group"
	opDeleteGroup = "delete_group"
	opPause       = "pause"
	opResume      = "resume"
)

// ErrCatalogApply: a committed catalog change could not be made on this
// broker for a reason of its own (a disk error): its catalog is behind
// the others' and must not take later changes until it is restarted.
var ErrCatalogApply = errors.New("broker: catalog change not applied here")

// proposeOp hands op to the CatalogLog and unpacks the result.
func (b *Broker) proposeOp(op catOp) (any, error) {
	if b.closed.Load() {
		return nil, ErrClosed
	}
	data, err := json.Marshal(op)
	if err != nil {
		return nil, fmt.Errorf("catalog change %s: %w", op.Kind, err)
	}
	v, err := b.opts.Catalog.Propose(data)
	if err != nil {
		return nil, err
	}
	r, ok := v.(CatalogResult)
	if !ok {
		return nil, fmt.Errorf("catalog change %s %s: the catalog log returned %T, not the apply's result", op.Kind, op.Topic, v)
	}
	return r.Value, r.Err
}

// CatalogIndex is the index of the last change ApplyCatalog (or
// RestoreCatalog) made durable here; 0 before any.
func (b *Broker) CatalogIndex() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cat.Index
}

// ApplyCatalog makes the change data at index (as Propose was given it)
// here. Changes must come one at a time, in index order; one at or below
// CatalogIndex is skipped (a replay). The change's own outcome, alike on
// every broker, is the result; the error is ErrCatalogApply when this
// broker could not make it (then it is not marked applied).
func (b *Broker) ApplyCatalog(index uint64, data []byte) (CatalogResult, error) {
	b.catApply.Lock()
	defer b.catApply.Unlock()
	if index <= b.CatalogIndex() {
		return CatalogResult{}, nil
	}
	var op catOp
	var res CatalogResult
	if err := decodeStrict(data, &op); err != nil {
		res.Err = fmt.Errorf("%w: catalog change at %d: %v", ErrInvalid, index, err)
	} else {
		res.Value, res.Err = b.applyOp(op)
	}
	if res.Err != nil && !deterministic(res.Err) {
		return CatalogResult{}, fmt.Errorf("%w: %s %s at index %d: %w", ErrCatalogApply, op.Kind, op.Topic, index, res.Err)
	}
	if err := b.markIndex(index); err != nil {
		return CatalogResult{}, fmt.Errorf("%w: mark index %d: %w", ErrCatalogApply, index, err)
	}
	return res, nil
}

// deterministic reports whether err is an outcome every broker reaches
// alike for the same change on the same catalog (a refusal), rather than
// a failure of this one's.
func deterministic(err error) bool {
	for _, e := range []error{ErrInvalid, ErrTopicExists, ErrNoTopic, ErrNoGroup, ErrOverlap} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// applyOp makes op here.
func (b *Broker) applyOp(op catOp) (any, error) {
	if op.Kind == opCreateTopic {
		if op.TopicConfig == nil {
			return nil, fmt.Errorf("%w: create_topic without a config", ErrInvalid)
		}
		return b.createTopic(op.Topic, *op.TopicConfig, 0, op.Placement)
	}
	if op.Kind == opDeleteTopic {
		return nil, b.deleteTopic(op.Topic)
	}
	t, ok := b.Topic(op.Topic)
	if !ok {
		return nil, fmt.Errorf("%s %s/%s: %w", op.Kind, op.Topic, op.Group, ErrNoTopic)
	}
	switch op.Kind {
	case opGroup:
		if op.GroupConfig == nil {
			return nil, fmt.Errorf("%w: group without a config", ErrInvalid)
		}
		return t.group(op.Group, *op.GroupConfig, 0)
	case opDeleteGroup:
		return nil, t.deleteGroup(op.Group)
	case opPause, opResume:
		g, ok := t.FindGroup(op.Group)
		if !ok {
			return nil, fmt.Errorf("%s %s/%s: %w", op.Kind, op.Topic, op.Group, ErrNoGroup)
		}
		return nil, g.setPausedHere(op.Kind == opPause)
	}
	return nil, fmt.Errorf("%w: catalog change kind %q", ErrInvalid, op.Kind)
}

// markIndex records index as applied, in a journal record of its own
// after the change's.
func (b *Broker) markIndex(index uint64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.commitCatalog(catChange{NextTopicID: b.cat.NextTopicID, NextGroupID: b.cat.NextGroupID, Index: index})
}

// CatalogSnapshot returns the catalog as ApplyCatalog left it, for a
// broker that must catch up past changes no longer kept
// (RestoreCatalog).
func (b *Broker) CatalogSnapshot() ([]byte, error) {
	b.catApply.Lock()
	defer b.catApply.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	return json.Marshal(b.cat)
}

// RestoreCatalog makes this broker's catalog the snapshot's (taken at
// index by CatalogSnapshot elsewhere): topics and groups it lacks are
// made with the snapshot's ids and settings, those the snapshot lacks
// are deleted, pauses follow it. A failure is ErrCatalogApply.
func (b *Broker) RestoreCatalog(index uint64, data []byte) error {
	b.catApply.Lock()
	defer b.catApply.Unlock()
	var want catalog
	if err := decodeStrict(data, &want); err != nil {
		return fmt.Errorf("%w: catalog snapshot at %d: %v", ErrCatalogApply, index, err)
	}
	if err := b.reconcile(want); err != nil {
		return fmt.Errorf("%w: restore the catalog at %d: %w", ErrCatalogApply, index, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := catChange{NextTopicID: max(b.cat.NextTopicID, want.NextTopicID), NextGroupID: max(b.cat.NextGroupID, want.NextGroupID), Index: index}
	b.nextID = max(b.nextID, ch.NextTopicID)
	return b.commitCatalog(ch)
}

// reconcile makes the catalog want's: deletes first (a name may have
// been taken again), then topics by id (dead-letter topics before the
// groups that name them), then each topic's groups and pauses.
func (b *Broker) reconcile(want catalog) error {
	wanted := map[TopicID]catTopic{}
	for _, ct := range want.Topics {
		wanted[ct.ID] = ct
	}
	for _, t := range b.Topics() {
		if ct, ok := wanted[t.id]; !ok || ct.Name != t.name {
			if err := b.deleteTopic(t.name); err != nil && !errors.Is(err, ErrNoTopic) {
				return err
			}
		}
	}
	ids := make([]TopicID, 0, len(wanted))
	for id := range wanted {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		ct := wanted[id]
		if t, ok := b.TopicByID(id); ok && t.name == ct.Name {
			continue
		}
		if _, err := b.createTopic(ct.Name, ct.Config, id, ct.Placement); err != nil {
			return err
		}
	}
	for _, id := range ids {
		ct := wanted[id]
		t, ok := b.TopicByID(id)
		if !ok {
			return fmt.Errorf("topic %s (id %d) missing after its create", ct.Name, id)
		}
		if err := t.reconcileGroups(ct.Groups); err != nil {
			return err
		}
	}
	return nil
}

// reconcileGroups makes t's groups want's.
func (t *Topic) reconcileGroups(want []catGroup) error {
	byName := map[GroupName]catGroup{}
	for _, cg := range want {
		byName[cg.Name] = cg
	}
	t.b.mu.Lock()
	have := make([]*Group, 0, len(t.groups))
	for _, g := range t.groups {
		have = append(have, g)
	}
	t.b.mu.Unlock()
	for _, g := range have {
		if cg, ok := byName[g.name]; !ok || cg.ID != g.id {
			if err := t.deleteGroup(g.name); err != nil && !errors.Is(err, ErrNoGroup) {
				return err
			}
		}
	}
	for _, cg := range want {
		g, ok := t.FindGroup(cg.Name)
		if !ok {
			var err error
			if g, err = t.group(cg.Name, cg.Config, cg.ID); err != nil {
				return err
			}
		}
		if g.Paused() != cg.Paused {
			if err := g.setPausedHere(cg.Paused); err != nil {
				return err
			}
		}
	}
	return nil
}
