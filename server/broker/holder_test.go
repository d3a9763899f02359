package broker

import (
	"errors"
	"testing"
	"time"
)

// TestSettleAsBindsToTheHolder: a settle made As a principal other than the
// one the attempt was delivered to is refused and changes nothing; the
// binding outlives the lease (NACK) until the next delivery, and is
// forgotten by a restart (leases are not persisted).
func TestSettleAsBindsToTheHolder(t *testing.T) {
	g := newGroupState(1, int64(time.Minute), 5, 1)
	if a := g.deliver(1, 0, 7, 2, nil); a != 1 {
		t.Fatalf("attempt %d", a)
	}
	steps := []struct {
		name string
		op   SettleOp
		want error
	}{
		{"extend by another", Extend(0).As(3), ErrNotHolder},
		{"nack by another", Nack(0).As(3), ErrNotHolder},
		{"reject by another", Reject().As(3), ErrNotHolder},
		{"ack by another", Ack().As(3), ErrNotHolder},
		{"extend by the holder", Extend(0).As(2), nil},
		{"nack by the holder", Nack(time.Hour).As(2), nil},
		{"ack by another after the lease", Ack().As(3), ErrNotHolder},
		{"nack without a principal", Nack(0), nil},
	}
	for _, s := range steps {
		if err := g.settle(1, 1, s.op, 0); !errors.Is(err, s.want) {
			t.Fatalf("%s: %v, want %v", s.name, err, s.want)
		}
	}
	if p := g.pending[1]; p.attempts != 1 || g.cnt.Acked != 0 {
		t.Fatalf("a refused settle changed the state: %+v acked %d", p, g.cnt.Acked)
	}
	g.restored(0)
	if err := g.settle(1, 1, Ack().As(3), 0); err != nil {
		t.Fatalf("after a restart the binding is forgotten: %v", err)
	}
	if err := g.settle(1, 1, Ack().As(4), 0); err != nil {
		t.Fatalf("acking a settled message stays idempotent: %v", err)
	}
}

// TestReleaseOwnerForgetsThePrincipal: the owner → principal bindings are
// bounded by the live owners: ReleaseOwner (a connection's close) drops
// its entry, and binding 0 drops it too.
func TestReleaseOwnerForgetsThePrincipal(t *testing.T) {
	b := newMemEnv(t, nil).b
	b.SetPrincipal(7, 3)
	b.SetPrincipal(8, 4)
	if b.principalOf(7) != 3 || b.principalOf(8) != 4 || b.principalOf(9) != 0 {
		t.Fatal("bindings not kept")
	}
	b.ReleaseOwner(7)
	b.SetPrincipal(8, 0)
	n := 0
	b.principals.Range(func(any, any) bool { n++; return true })
	if n != 0 || b.principalOf(7) != 0 {
		t.Fatalf("%d bindings left after release", n)
	}
}
