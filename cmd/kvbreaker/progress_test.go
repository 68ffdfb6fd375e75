package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestSimulateProgress: a run longer than progressAfter shows progress on
// a terminal's stderr; not on a pipe or buffer (the default here).
func TestSimulateProgress(t *testing.T) {
	args := append(small, "--duration", "24h")
	// Negative control first: a buffer is not a terminal, so nothing.
	if code, _, errOut := runT(t, args...); code != exitOK || errOut != "" {
		t.Fatalf("not a terminal: exit %d, stderr %q", code, errOut)
	}
	defer func(a, k time.Duration, f func(io.Writer) bool) { progressAfter, progressTick, progressTTY = a, k, f }(progressAfter, progressTick, progressTTY)
	progressAfter, progressTick, progressTTY = 0, time.Millisecond, func(io.Writer) bool { return true }
	code, _, errOut := runT(t, args...)
	if code != exitOK || !strings.Contains(errOut, "simulated (") || !strings.Contains(errOut, "of 25h0m0s") {
		t.Fatalf("terminal: exit %d, stderr %q", code, errOut)
	}
}
