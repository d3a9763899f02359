package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// loadCatalog (Open) reads the catalog and its journal, folds them into a
// new catalog.json when the journal holds changes (or the catalog was
// written by an earlier version), opens the journal, gives every listed
// topic its topic.json, and reports the topic
// directories the catalog does not list: they are kept, never served,
// never reused (freeTopicID), and fibril repair can adopt them.
func (b *Broker) loadCatalog() error {
	cat, fold, err := loadCatalog(b.dir)
	if err != nil {
		return err
	}
	b.cat = cat
	ids, err := topicDirIDs(b.dir)
	if err != nil {
		return err
	}
	listed := make(map[TopicID]bool, len(cat.Topics))
	for _, ct := range cat.Topics {
		listed[ct.ID] = true
	}
	for _, id := range ids {
		if !listed[id] {
			b.orphans = append(b.orphans, topicDirOf(b.dir, id))
			b.logf("WARN %s is not in the catalog: kept and not served (a topic create cut short, or a catalog that lost it); `fibril verify --data %s` describes it, `fibril repair --data %s --adopt` takes it back",
				topicDirOf(b.dir, id), b.dir, b.dir)
		}
	}
	for _, ct := range cat.Topics {
		if _, err := os.Stat(topicDirOf(b.dir, ct.ID)); err != nil {
			continue // Open refuses it, naming the topic
		}
		if err := b.cat.syncTopicRecord(b.dir, ct); err != nil {
			return fmt.Errorf("topic %s: %w", ct.Name, err)
		}
	}
	if fold {
		if err := b.cat.save(b.dir, 0); err != nil {
			return fmt.Errorf("fold the catalog journal: %w", err)
		}
	}
	j, err := openJournal(b.dir, journalHeaderLen)
	if err != nil {
		return err
	}
	b.journal = j
	if fi, err := os.Stat(filepath.Join(b.dir, catalogName)); err == nil {
		b.catBytes = fi.Size()
	}
	return nil
}

// freeTopicID returns the next topic id whose directory does not exist.
func (b *Broker) freeTopicID() (TopicID, error) {
	id := max(b.cat.NextTopicID, b.nextID) // ids reserved by creates in flight too
	if b.opts.Catalog != nil {
		// Every broker of a replicated catalog takes the same id for the
		// same change; a directory of that id is this change's own, left
		// by an apply a crash interrupted (catrepl.go).
		return id, nil
	}
	for ; ; id++ {
		_, err := os.Lstat(b.topicDir(id))
		if os.IsNotExist(err) {
			return id, nil
		}
		if err != nil {
			return 0, fmt.Errorf("topic directory %s: %w", b.topicDir(id), err)
		}
	}
}

// Orphans lists the topic directories the catalog did not list at Open
// (kept, not served).
func (b *Broker) Orphans() []string { return slices.Clone(b.orphans) }
