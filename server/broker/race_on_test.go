//go:build race

package broker

// raceEnabled trims the seed counts of the heavier randomized tests so the
// package stays fast under -race; the plain run covers more seeds.
const raceEnabled = true
