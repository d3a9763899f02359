// Package stagetime owns the per-stage latency accounting of a publish's
// path through the server: where the time between a PUB's socket read and
// its confirm (and a delivery's write, and an ack's commit) goes. It holds
// a lock-free histogram type (Hist), the list of stages (Stage) and a
// Recorder with one histogram per stage, fed by the network layer and the
// engine and read by the admin listener's /metrics.
//
// Every stage of a chain is measured from the chain's origin, so the
// stages of one chain are cumulative: a publish's "appended" is the time
// from the socket read that brought it to the end of the data append that
// holds it. Chains are sampled, not per message: the server marks the
// first durable PUB (and the first ACK) of a socket read, at most one a
// Gate's gap server-wide (DefaultGap), the first delivery of each POLL
// answer and every 64th of a push subscription, and the engine reads the
// clock once per round that carries a marked publish: a few clock reads
// per sample, a bounded number of samples a second, never an allocation.
//
// It must never block, allocate per observation, or be required: a nil
// *Recorder ignores every observation.
//
// Caveats: times are monotonic nanoseconds since the process loaded this
// package (Now); a sample that crosses a process boundary is meaningless.
// Histogram buckets are a quarter of an octave wide (values within 19 %).
package stagetime
