package broker

import (
	"errors"
	"slices"
	"testing"
)

// TestSpreadPlacement: each partition gets replicas distinct nodes, the
// partitions of a topic start on consecutive nodes (so they spread), the
// answer depends only on the names (not their order), and a count out of
// 1..nodes is refused.
func TestSpreadPlacement(t *testing.T) {
	nodes := []string{"n3", "n1", "n5", "n2", "n4"}
	place := SpreadPlacement(nodes)
	again := SpreadPlacement([]string{"n1", "n2", "n3", "n4", "n5"})
	for _, tc := range []struct {
		parts, replicas int
		wantErr         bool
	}{
		{1, 1, false}, {3, 1, false}, {5, 3, false}, {8, 3, false}, {2, 5, false},
		{1, 0, true}, {1, 6, true}, {1, -1, true},
	} {
		got, err := place("orders", tc.parts, tc.replicas)
		if tc.wantErr {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%d partitions replicas %d: %v, want ErrInvalid", tc.parts, tc.replicas, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%d partitions replicas %d: %v", tc.parts, tc.replicas, err)
		}
		other, _ := again("orders", tc.parts, tc.replicas)
		if !slices.EqualFunc(got, other, slices.Equal) {
			t.Errorf("placement depends on the names' order: %v vs %v", got, other)
		}
		if len(got) != tc.parts {
			t.Fatalf("%d lists for %d partitions", len(got), tc.parts)
		}
		count := map[string]int{}
		for i, hs := range got {
			if len(hs) != tc.replicas || len(slices.Compact(slices.Clone(hs))) != tc.replicas || !slices.IsSorted(hs) {
				t.Errorf("partition %d on %v: want %d distinct nodes, sorted", i, hs, tc.replicas)
			}
			for _, h := range hs {
				count[h]++
			}
		}
		// Spread: with partitions*replicas >= nodes every node holds
		// something, and no node holds more than its share rounded up.
		total := tc.parts * tc.replicas
		if total >= len(nodes) && len(count) != len(nodes) {
			t.Errorf("%d partitions replicas %d on %d of 5 nodes: %v", tc.parts, tc.replicas, len(count), got)
		}
		for n, c := range count {
			if share := (total + len(nodes) - 1) / len(nodes); c > share {
				t.Errorf("%s holds %d replicas, more than its share %d: %v", n, c, share, got)
			}
		}
	}
}

// TestCheckPlacement: a catalog change's placement must fit the topic's
// partitions and replicas (each refusal ErrInvalid, alike on every
// broker); every node needs none.
func TestCheckPlacement(t *testing.T) {
	b := &Broker{opts: Options{Replicas: 3}}
	cfg := func(parts, r int) TopicConfig { return TopicConfig{Partitions: parts, Replicas: r} }
	for _, tc := range []struct {
		name      string
		cfg       TopicConfig
		placement [][]string
		ok        bool
	}{
		{"every node, none named", cfg(2, 0), nil, true},
		{"every node given as 3", cfg(2, 3), nil, true},
		{"one each", cfg(2, 1), [][]string{{"n1"}, {"n2"}}, true},
		{"fewer without placement", cfg(2, 1), nil, false},
		{"a partition missing", cfg(2, 1), [][]string{{"n1"}}, false},
		{"wrong count", cfg(1, 2), [][]string{{"n1"}}, false},
		{"a node twice", cfg(1, 2), [][]string{{"n1", "n1"}}, false},
		{"above the nodes", cfg(1, 4), [][]string{{"n1", "n2", "n3", "n4"}}, false},
	} {
		err := b.checkPlacement(tc.cfg, tc.placement)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
