package lrucmp

import "time"

type Version uint64
type Record struct {
	Failures        []time.Time
	RestrainedUntil time.Time
	Probing         bool
}
type current struct {
	rec Record
	ver Version
}
