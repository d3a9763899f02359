package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkGroupPropose measures committed proposals per second on a
// 3-replica group over the in-process transport (real fsyncs in a temp
// dir), with 16 proposers at once.
func BenchmarkGroupPropose(b *testing.B) {
	base := b.TempDir()
	net := &chanNet{groups: map[uint64]*Group{}}
	peers := []uint64{1, 2, 3}
	groups := map[uint64]*Group{}
	for _, id := range peers {
		g, err := OpenGroup(Config{ID: id, Peers: peers, Dir: filepath.Join(base, strconv.Itoa(int(id)))},
			&lockedSM{sm: newTestSM()}, net, 5*time.Millisecond)
		if err != nil {
			b.Fatal(err)
		}
		net.set(id, g)
		groups[id] = g
	}
	defer func() {
		for _, g := range groups {
			g.Close()
		}
	}()
	var lead *Group
	for deadline := time.Now().Add(10 * time.Second); lead == nil; {
		if time.Now().After(deadline) {
			b.Fatal("no leader")
		}
		if l := groups[1].Leader(); l != 0 {
			lead = groups[l]
		}
		time.Sleep(time.Millisecond)
	}
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := lead.Propose(context.Background(), []byte(fmt.Sprint("b", n.Add(1)))); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
