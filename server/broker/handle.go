package broker

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseHandle parses an ack handle subject "$F.<topic>.<group>.<partition>.
// <seq>.<attempt>" (decimal numbers, as Handle.String writes it). It returns
// an error wrapping ErrInvalid for anything else; s is not retained.
func ParseHandle(s string) (Handle, error) {
	rest, ok := strings.CutPrefix(s, "$F.")
	if !ok {
		return Handle{}, fmt.Errorf("%w: handle %q does not start with $F.", ErrInvalid, s)
	}
	var v [5]uint64
	bits := [5]int{32, 32, 32, 64, 32}
	for i := range v {
		tok := rest
		if i < len(v)-1 {
			var found bool
			tok, rest, found = strings.Cut(rest, ".")
			if !found {
				return Handle{}, fmt.Errorf("%w: handle %q has too few tokens", ErrInvalid, s)
			}
		}
		if tok == "" || tok[0] == '+' || tok[0] == '-' {
			return Handle{}, fmt.Errorf("%w: handle %q token %d", ErrInvalid, s, i+2)
		}
		n, err := strconv.ParseUint(tok, 10, bits[i])
		if err != nil {
			return Handle{}, fmt.Errorf("%w: handle %q token %d: %v", ErrInvalid, s, i+2, err)
		}
		v[i] = n
	}
	return Handle{Topic: TopicID(v[0]), Group: GroupID(v[1]), Partition: Partition(v[2]), Seq: Seq(v[3]), Attempt: uint32(v[4])}, nil
}
