// Package netns owns the network plumbing of the cluster fault harness
// (issue 26's nodes, internal/faultrun's future network faults): private
// network namespaces on one machine, joined by veth pairs to a bridge that
// lives in a namespace of its own, and the faults done to those links:
// a node cut off (its link down), partitions of any shape (routes that
// refuse the other side), and delay, loss and duplication with tc netem
// where the kernel has it.
//
// Everything is driven through the ip(8) and tc(8) commands, and, to open
// sockets inside a namespace from this process, through setns(2) on a
// locked thread (Do).
//
// It must never touch the machine's own namespace: every interface it
// creates lives in a namespace it created, whose name starts with the
// Net's prefix, and Close deletes them all. Every command runs with a
// timeout.
//
// # Caveats
//
//   - Needs root and ip(8); netem needs the sch_netem kernel module
//     (ErrNoNetem without it).
//   - A process that dies without Close leaves its namespaces: delete them
//     with `ip netns del <prefix>-...`.
package netns
