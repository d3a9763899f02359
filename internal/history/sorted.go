package history

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// sortedKeys returns m's keys in order, so reports do not depend on map
// iteration.
func sortedKeys[K comparable, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b K) int { return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return keys
}

func sortedSet(m map[string]bool) []string { return sortedKeys(m) }

func ms(ns int64) string { return time.Duration(ns).Round(time.Millisecond).String() }
