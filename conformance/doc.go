// Package conformance runs Fibril's language-neutral conformance scenarios
// (conformance/scenarios/*.json, format in conformance/README.md) against a
// live server, through interchangeable drivers: a raw-wire driver that
// writes the bytes of SPEC.md itself (no SDK) and a Go SDK driver. The Python
// and TypeScript SDKs ship their own runners for the same files.
//
// It owns the scenario format, the step interpreter and the drivers. It must
// never relax an expectation to make a runner pass: a scenario says what
// SPEC.md says, and a failure is reported as a failure. conformance/vectors/
// (the parser vectors) belong to the protocol package, not to this one.
package conformance
