package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// commitCatalog makes a catalog change durable and applies it to b.cat
// (callers hold b.mu): the topic's topic.json first, then one journal
// record, fsynced. When the journal has outgrown the catalog it is folded
// into a new catalog.json; a fold that fails is logged and retried at the
// next change (the change itself is durable in the journal).
func (b *Broker) commitCatalog(ch catChange) error {
	if ch.Topic != nil {
		r := topicRecord{Topic: *ch.Topic, NextTopicID: ch.NextTopicID, NextGroupID: ch.NextGroupID}
		if err := writeTopicRecord(topicDirOf(b.dir, ch.Topic.ID), r); err != nil {
			return err
		}
	}
	if err := b.journal.append(ch); err != nil {
		return err
	}
	b.cat.apply(ch)
	if b.journal.size > max(journalMinFold, b.catBytes) {
		if err := b.foldCatalog(); err != nil {
			b.logf("ERROR folding the catalog journal into %s: %v (the changes stay in the journal)", filepath.Join(b.dir, catalogName), err)
		}
	}
	return nil
}

// journalBroken reports whether a failed commit may have reached the disk
// after all (an fsync failed): what it created must then be kept.
func (b *Broker) journalBroken() bool { return b.journal.err != nil }

// foldCatalog writes b.cat as a new catalog.json with an empty journal and
// reopens the journal. Whatever happens, the journal is reopened as the
// disk has it; if that fails, it is broken (no later change commits).
func (b *Broker) foldCatalog() error {
	if b.journal.err != nil {
		return b.journal.err
	}
	err := b.cat.save(b.dir, 0)
	b.journal.close()
	var scratch catalog
	_, end, _, rerr := readJournal(b.dir, &scratch)
	if rerr == nil {
		var j *catJournal
		if j, rerr = openJournal(b.dir, end); rerr == nil {
			b.journal = j
		}
	}
	if rerr != nil {
		b.journal.err = fmt.Errorf("reopen the catalog journal: %w", rerr)
		return b.journal.err
	}
	if fi, serr := os.Stat(filepath.Join(b.dir, catalogName)); serr == nil {
		b.catBytes = fi.Size()
	}
	return err
}

// closeCatalog folds a journal that holds changes and closes it (Close).
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
