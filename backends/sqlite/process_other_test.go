//go:build !unix

package sqlite_test

// runWorker: the worker processes need SIGKILL and run on Unix only.
func runWorker(string) int { return 2 }
