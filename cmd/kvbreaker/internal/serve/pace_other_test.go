//go:build !linux

package serve

import "time"

// waitUntil returns at t or soon after (the runtime's timer resolution).
func waitUntil(t time.Time) { time.Sleep(time.Until(t)) }
