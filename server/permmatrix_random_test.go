package server

// The generated form of the permission matrix: random users (rules drawn
// from filters over a small alphabet, random roles), random topics, random
// subjects, filters, TOPIC CREATE requests and dead-letter targets, each
// run through runMatrix against the reference model. `go test` runs one
// seed; `make perm-matrix` runs many (PERM_SEEDS, PERM_SEED).

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestPermissionMatrixRandom(t *testing.T) {
	seeds, start := envInt(t, "FIBRIL_PERM_SEEDS", 1), envInt(t, "FIBRIL_PERM_SEED", 1)
	for seed := start; seed < start+seeds; seed++ {
		t.Run("seed"+strconv.Itoa(seed), func(t *testing.T) {
			runMatrix(t, randomMatrix(uint64(seed)))
		})
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a count", name, v)
	}
	return n
}

// randomMatrix builds a matrix from seed. Fixture topics use the tokens
// a, b, c and never overlap each other, "d.>" (the TOPIC DELETE
// candidates) or "zz.purge".
func randomMatrix(seed uint64) matrixSpec {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	tok := func() string { return []string{"a", "b", "c"}[r.IntN(3)] }
	subject := func() string {
		parts := make([]string, 1+r.IntN(3))
		for i := range parts {
			parts[i] = tok()
		}
		return strings.Join(parts, ".")
	}
	filter := func() string {
		n := 1 + r.IntN(3)
		parts := make([]string, n)
		for i := range parts {
			switch x := r.IntN(10); {
			case x < 2:
				parts[i] = "*"
			case x < 3 && i == n-1:
				parts[i] = ">"
			default:
				parts[i] = tok()
			}
		}
		return strings.Join(parts, ".")
	}
	filters := func(lo, hi int) []string {
		out := make([]string, lo+r.IntN(hi-lo+1))
		for i := range out {
			out[i] = filter()
			if r.IntN(12) == 0 {
				out[i] = []string{"$DLQ.>", "_INBOX.>", ">", "d.>"}[r.IntN(4)]
			}
		}
		return out
	}
	rule := func() refRule {
		var ru refRule
		if r.IntN(4) != 0 {
			ru.allow = filters(1, 3)
		}
		if r.IntN(2) == 0 {
			ru.deny = filters(1, 2)
		}
		return ru
	}
	spec := matrixSpec{users: []refUser{{name: "root", role: "admin"}}}
	for i := 1; i <= 5; i++ {
		spec.users = append(spec.users, refUser{name: "u" + strconv.Itoa(i),
			role: []string{"", "", "monitor", "admin"}[r.IntN(4)], pub: rule(), con: rule()})
	}
	taken := []string{"d.>", "zz.purge"}
	names := map[string]bool{}
	for tries := 0; len(spec.topics) < 4 && tries < 200; tries++ {
		tp := refTopic{name: subject()}
		if r.IntN(2) == 0 {
			tp.filters = filters(1, 2)
			for i, f := range tp.filters {
				if strings.HasPrefix(f, "$") || strings.HasPrefix(f, "_") {
					tp.filters[i] = tp.name + ".x"
				}
			}
		}
		caps := tp.filters
		if len(caps) == 0 {
			caps = []string{tp.name}
		}
		ok := !names[tp.name]
		for _, f := range caps {
			for _, o := range taken {
				ok = ok && !refOverlap(f, o)
			}
		}
		if !ok {
			continue
		}
		names[tp.name] = true
		taken = append(taken, caps...)
		spec.topics = append(spec.topics, tp)
	}
	for range 8 {
		spec.subjects = append(spec.subjects, subject())
		spec.filters = append(spec.filters, filter())
	}
	spec.subjects = append(spec.subjects, "$DLQ.a", "_INBOX.a")
	spec.filters = append(spec.filters, "$DLQ.>", ">")
	for len(spec.creates) < 8 {
		tp := refTopic{name: subject()}
		if r.IntN(2) == 0 {
			tp.filters = filters(1, 2)
		}
		if !names[tp.name] {
			spec.creates = append(spec.creates, tp)
		}
	}
	spec.creates = append(spec.creates, refTopic{name: "$a"}, refTopic{name: "b.new", filters: []string{"$DLQ.>"}})
	first := spec.topics[0].name
	spec.deletes = []refTopic{{name: "d.a"}, {name: "d.b", filters: []string{"d.b", "d.c.*"}}, {name: "d.c"}, {name: "$DLQ." + first + ".d"}}
	spec.deadLetters = []string{"", "-", "default", "$F.1.1.0.1.1", "$DLQ." + first + ".mg",
		spec.topics[r.IntN(len(spec.topics))].name, spec.topics[len(spec.topics)-1].name, "d.dl", subject() + ".dl"}
	return spec
}
