package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// commitCatalog makes a catalog change durable and applies it to b.cat
// (callers hold b.mu), then folds the journal if it has outgrown the
// catalog.
func (b *Broker) commitCatalog(ch catChange) error {
	if err := b.persistChange(ch); err != nil {
		return err
	}
	b.cat.apply(ch)
	b.journal.applied()
	b.maybeFoldLocked()
	return nil
}

// persistChange makes a change durable, b.mu held or not: the topic's
// topic.json first, then one journal record, whose fsync it may share
// with other changes. On nil the journal counts it as unapplied until the
// caller applies it to b.cat and calls b.journal.applied.
func (b *Broker) persistChange(ch catChange) error {
	if ch.Topic != nil {
		r := topicRecord{Topic: *ch.Topic, NextTopicID: ch.NextTopicID, NextGroupID: ch.NextGroupID}
		if err := writeTopicRecord(topicDirOf(b.dir, ch.Topic.ID), r); err != nil {
			return err
		}
	}
	return b.journal.append(ch)
}

// maybeFoldLocked folds the journal once it has outgrown the catalog; a
// fold that fails is logged and retried at the next change (the changes
// are durable in the journal).
func (b *Broker) maybeFoldLocked() {
	b.journal.mu.Lock()
	size := b.journal.size
	b.journal.mu.Unlock()
	if size <= max(journalMinFold, b.catBytes) {
		return
	}
	if err := b.foldCatalog(); err != nil {
		b.logf("ERROR folding the catalog journal into %s: %v (the changes stay in the journal)", filepath.Join(b.dir, catalogName), err)
	}
}

// foldCatalog (b.mu held) writes b.cat as a new catalog.json with an empty
// journal and reopens the journal, unless a change is durable in the
// journal and not yet in b.cat (a create between its fsync and its apply):
// then it does nothing, and a later change folds. Whatever happens the
// journal is reopened as the disk has it; if that fails, it is broken (no
// later change commits).
func (b *Broker) foldCatalog() error {
	j := b.journal
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return j.err
	}
	if j.unapplied > 0 {
		return nil
	}
	err := b.cat.save(b.dir, 0)
	j.f.Close()
	var scratch catalog
	_, end, _, rerr := readJournal(b.dir, &scratch)
	if rerr == nil {
		rerr = j.openAt(end)
	}
	if rerr != nil {
		j.err = fmt.Errorf("reopen the catalog journal: %w", rerr)
		return j.err
	}
	if fi, serr := os.Stat(filepath.Join(b.dir, catalogName)); serr == nil {
		b.catBytes = fi.Size()
	}
	return err
}

// closeCatalog folds a journal that holds changes and closes it (Close,
// with no create in flight).
func (b *Broker) closeCatalog() error {
	var err error
	if b.journal.records() {
		err = b.foldCatalog()
	}
	b.journal.close()
	return err
}

// entry returns a copy of the catalog entry of topic id, safe to change.
func (c *catalog) entry(id TopicID) (catTopic, bool) {
	for _, ct := range c.Topics {
		if ct.ID == id {
			ct.Groups = slices.Clone(ct.Groups)
			return ct, true
		}
	}
	return catTopic{}, false
}

// changeOf is a change giving topic ct's entry, with the current counters.
func (c *catalog) changeOf(ct catTopic) catChange {
	return catChange{NextTopicID: c.NextTopicID, NextGroupID: c.NextGroupID, Topic: &ct}
}
