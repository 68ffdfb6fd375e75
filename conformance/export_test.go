package conformance

// CheckHistory lets the suite's tests replace porcupine's search (to make
// it time out) in tests that do not run in parallel.
var CheckHistory = &checkHistory
