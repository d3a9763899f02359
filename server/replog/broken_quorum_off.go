//go:build !fibril_broken_quorum

package replog

// brokenConfirmBeforeCommit is false in every real build
// (broken_quorum_on.go).
const brokenConfirmBeforeCommit = false
