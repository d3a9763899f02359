package cluster

import (
	"fmt"
	"net"
	"strings"
)

// maxNameLen bounds a node name (it is a certificate DNS name too).
const maxNameLen = 63

// ParsePeers parses a seed list as a flag or config file gives it:
// "name@host:port" items separated by commas (spaces around them
// ignored), e.g. "n2@10.0.0.2:7422,n3@10.0.0.3:7422". A name is 1 to 63
// letters, digits and hyphens, not starting or ending with a hyphen (a
// DNS label, as the node's certificate names it). An empty string is no
// peers. It fails naming the first bad item, or a name given twice.
func ParsePeers(s string) ([]PeerConfig, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []PeerConfig
	seen := map[string]bool{}
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		name, addr, ok := strings.Cut(item, "@")
		if !ok {
			return nil, fmt.Errorf("cluster: peer %d %q: want name@host:port", i+1, item)
		}
		if err := checkName(name); err != nil {
			return nil, fmt.Errorf("cluster: peer %d %q: %w", i+1, item, err)
		}
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
			return nil, fmt.Errorf("cluster: peer %d %q: address %q is not host:port", i+1, item, addr)
		}
		if seen[name] {
			return nil, fmt.Errorf("cluster: peer %d %q: name %s given twice", i+1, item, name)
		}
		seen[name] = true
		out = append(out, PeerConfig{Name: name, Addr: addr})
	}
	return out, nil
}

// checkName checks that name is a DNS label.
func checkName(name string) error {
	if name == "" || len(name) > maxNameLen {
		return fmt.Errorf("name of %d bytes, want 1 to %d", len(name), maxNameLen)
	}
	if name[0] == '-' || name[len(name)-1] == '-' {
		return fmt.Errorf("name %q starts or ends with a hyphen", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("name %q has %q: want letters, digits and hyphens", name, c)
		}
	}
	return nil
}
