//go:build !linux

package serve

// waiters are the ways the open loop's clients can wait for an arrival.
var waiters = []waiter{{"sleep", sleepWait}}
