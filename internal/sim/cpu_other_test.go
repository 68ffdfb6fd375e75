//go:build !unix

package sim

import "time"

// processCPU reports no process CPU clock outside Unix.
func processCPU() (time.Duration, bool) { return 0, false }
