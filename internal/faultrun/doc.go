// Package faultrun owns fault runs against real `fibril serve` processes:
// it starts nodes, drives producers and consumers through the Go SDK from
// outside them, injects faults on a schedule drawn from a seed, records
// every client operation and fault in a history (internal/history), drains
// what is left once the faults are healed, and has the checker judge the
// run. A failing run keeps its history and prints its seed.
//
// The parts, so that a cluster harness (issue 26) adds nodes and fault
// kinds without touching the rest:
//
//   - Node (node.go): one broker process and what can be done to it: kill
//     and restart, pause and resume (SIGSTOP/SIGCONT), step its clock
//     (internal/offsetclock through FIBRIL_TEST_CLOCK_OFFSET_FILE), cut its
//     power (internal/faultfs under its data directory). ProcNode is the
//     local process; ClusterNode (cluster.go) is one node of a Cluster:
//     3 or 5 `fibril serve` cluster nodes, each in its own network
//     namespace (internal/netns), the clients in another, the leader read
//     from each node's GET /api/cluster inside its namespace.
//   - Fault (fault.go): a kind of fault, injected on a node, held, healed,
//     each step recorded as a fault op. Kill, Pause, ClockStep, PowerCut,
//     FsyncFail, DiskFull; on a cluster (netfault.go) also Leader{F} (F on
//     the leader), Isolate of the leader, Split (the leader on the
//     minority side), Bridge, and Netem delay, loss and duplication.
//   - Run (run.go): Config (seed, duration, nodes, fault kinds, workload
//     size) in, Report out. The workload lives in workload.go.
//
// It must never leave a process running or a file system mounted after Run
// returns, never kill a process it did not start, and never judge a run
// whose final drain did not finish (the history is then incomplete).
//
// # Caveats
//
//   - Runs replay their fault schedule (kinds, order, hold times) from the
//     seed; process timing does not replay, so a seed reproduces the shape
//     of a failing run, not its exact interleaving.
//   - Netem needs the kernel's sch_netem: without it a Cluster reports
//     Netem false and the Netem kinds are left out (this CI kernel has
//     none).
//   - Power cuts need root and /dev/fuse; without them ProcNode reports
//     CanPowerCut false and the schedule leaves PowerCut out.
//   - Clients connect with SDK reconnection off, so a publish whose answer
//     was lost is recorded as indeterminate and never resent: a value
//     stored twice is the broker's doing, not the client's.
package faultrun
