package clustertest

import (
	"os"
	"testing"
)

// TestMembers: each member has its own address and files, and every
// other member as a peer at that member's address.
func TestMembers(t *testing.T) {
	ms := Members(t, "a", "b", "c")
	seen := map[string]bool{}
	for name, m := range ms {
		if m.Name != name || seen[m.Addr] || len(m.Peers) != 2 {
			t.Fatalf("member %s: %+v", name, m)
		}
		seen[m.Addr] = true
		for _, f := range []string{m.TLS.CA, m.TLS.Cert, m.TLS.Key} {
			if _, err := os.Stat(f); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range m.Peers {
			if p.Name == name || ms[p.Name].Addr != p.Addr {
				t.Fatalf("member %s: peer %+v", name, p)
			}
		}
	}
}
