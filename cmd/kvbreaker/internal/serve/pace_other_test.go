//go:build !linux

package serve

import "time"

// waiters are the ways the open loop's clients can wait for an arrival.
var waiters = []waiter{{"sleep", sleepWait}}

// processCPU is not measured here: its rows report no CPU time.
func processCPU() time.Duration { return 0 }
