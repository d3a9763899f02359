package faultrun

import (
	"errors"
	"fmt"
	"testing"

	"github.com/fibrilmq/fibril/internal/history"
	"github.com/fibrilmq/fibril/protocol"
)

// TestInternalErrorIsAnUnknownOutcome is the regression test for a short
// fault run that failed CI ("unsettled: p1-111 delivered 1 times, never
// acked nor dead-lettered", seed 1796300166629771276): an ACK answered
// -ERR internal while fsyncs failed was recorded as a definite failure,
// but its event, written before the fsync failed, reached the disk and the
// ack held after the restart. An internal error's effect is unknown
// (SPEC.md error table), so the checker must treat it as maybe applied;
// every other -ERR stays a definite "nothing changed".
func TestInternalErrorIsAnUnknownOutcome(t *testing.T) {
	cl := &client{}
	wrap := func(code protocol.Code) error {
		return fmt.Errorf("fibril: ACK $F.1.1.1.111.1: %w", &protocol.Error{Code: code})
	}
	if got, _ := cl.outcome(wrap(protocol.CodeInternal)); got != history.Info {
		t.Fatalf("-ERR internal: %s, want %s", got, history.Info)
	}
	if got, _ := cl.outcome(wrap(protocol.CodeStaleHandle)); got != history.Fail {
		t.Fatalf("-ERR stale_handle: %s, want %s", got, history.Fail)
	}
	if got, _ := cl.outcome(errors.New("connection reset")); got != history.Info {
		t.Fatalf("a lost connection: %s, want %s", got, history.Info)
	}
	if got, _ := cl.outcome(nil); got != history.OK {
		t.Fatalf("no error: %s", got)
	}
}
