//go:build race

package sim

// raceEnabled: the race detector slows the single-goroutine simulator
// about tenfold and finds nothing in it; long runs shrink under it.
const raceEnabled = true
