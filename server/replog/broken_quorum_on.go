//go:build fibril_broken_quorum

package replog

// brokenConfirmBeforeCommit makes this a deliberately broken build: Sync
// and Durable on the serving leader claim every appended record without
// waiting for the quorum commit, so publishes and settles are answered
// before a quorum holds them. The cluster fault checker must catch it
// (internal/faultrun TestClusterBrokenBuildFailsTheChecker); never ship it.
const brokenConfirmBeforeCommit = true
