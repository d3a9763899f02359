package server

import (
	"fmt"
	"testing"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/server/cluster"
	"github.com/fibrilmq/fibril/server/metacat"
)

// TestCodeOfEngineErrors: each engine sentinel, wrapped as the engine wraps
// it, gets its wire code; ErrNotLeader is the retriable not_leader a
// client of a cluster retries elsewhere.
func TestCodeOfEngineErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want protocol.Code
	}{
		{broker.ErrNotLeader, protocol.CodeNotLeader},
		{broker.ErrClosed, protocol.CodeShuttingDown},
		{broker.ErrInvalidHeader, protocol.CodeInvalidHeader},
		{broker.ErrInvalid, protocol.CodeInvalidConfig},
		{broker.ErrNoTopic, protocol.CodeUnknownTopic},
		// The cluster's catalog before it has a leader (a fresh cluster's
		// first TOPIC CREATE was answered internal), mid-election, timed out.
		{fmt.Errorf("metacat: propose a catalog change: %w", cluster.ErrNotLeader), protocol.CodeNotLeader},
		{cluster.ErrLeaderChanged, protocol.CodeNotLeader},
		{metacat.ErrTimeout, protocol.CodeNotLeader},
		{metacat.ErrNotReady, protocol.CodeNotLeader},
		{metacat.ErrBusy, protocol.CodeQueueFull},
		{fmt.Errorf("something else"), protocol.CodeInternal},
	} {
		wrapped := fmt.Errorf("publish to t: %w", tc.err)
		if got := codeOf(wrapped); got != tc.want {
			t.Errorf("%v: code %s, want %s", tc.err, got, tc.want)
		}
	}
	if !protocol.ErrNotLeader.Retriable() {
		t.Error("not_leader is not retriable")
	}
}
