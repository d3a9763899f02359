package conformance

import (
	"context"
	"fmt"
	"os"

	"github.com/fibrilmq/fibril/conformance/fibrilproc"
)

// ClusterStarter returns an Env.Cluster that starts bin as a fresh cluster
// of n nodes under a new directory in dir for each cluster scenario; the
// returned stop kills every node and removes the directory.
func ClusterStarter(bin, dir string) func(ctx context.Context, n int) (*Env, func(), error) {
	return func(ctx context.Context, n int) (*Env, func(), error) {
		d, err := os.MkdirTemp(dir, "cluster-")
		if err != nil {
			return nil, nil, fmt.Errorf("conformance: %w", err)
		}
		c, err := fibrilproc.StartCluster(ctx, bin, d, n)
		if err != nil {
			os.RemoveAll(d)
			return nil, nil, err
		}
		stop := func() { c.Close(); os.RemoveAll(d) }
		info, err := ReadInfo(ctx, c.Addrs[0])
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("conformance: cluster node n1: %w", err)
		}
		return &Env{
			Addr: c.Addrs[0], Info: info, Nodes: c.Addrs,
			KillNode:    func(_ context.Context, i int) error { return c.Kill(i) },
			RestartNode: c.Restart,
		}, stop, nil
	}
}
