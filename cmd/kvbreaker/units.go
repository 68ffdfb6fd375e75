package main

import "time"

// ms is d in milliseconds, the unit of every duration in the JSON.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
