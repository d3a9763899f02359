package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// loadCatalog (Open) reads the catalog, seals one written before seals,
// gives every listed topic its topic.json, and reports the topic
// directories the catalog does not list: they are kept, never served,
// never reused (freeTopicID), and fibril repair can adopt them.
func (b *Broker) loadCatalog() error {
	cat, legacy, err := loadCatalog(b.dir)
	if err != nil {
		return err
	}
	b.cat = cat
	ids, err := topicDirIDs(b.dir)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if !slices.ContainsFunc(cat.Topics, func(ct catTopic) bool { return ct.ID == id }) {
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
	if legacy {
		if err := b.cat.save(b.dir, 0); err != nil {
			return fmt.Errorf("seal the catalog: %w", err)
		}
		b.logf("catalog %s sealed with a checksum (written by an earlier version without one)", filepath.Join(b.dir, catalogName))
	}
	return nil
}

// freeTopicID returns the next topic id whose directory does not exist.
func (b *Broker) freeTopicID() (TopicID, error) {
	id := b.cat.NextTopicID
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
