package simulate

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// runT runs simulate with args and returns its stdout and stderr.
func runT(t *testing.T, args ...string) (string, string) {
	t.Helper()
	var f Flags
	fs := pflag.NewFlagSet("simulate", pflag.ContinueOnError)
	f.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := Run(&f, &out, &errOut); err != nil {
		t.Fatalf("simulate %v: %v", args, err)
	}
	return out.String(), errOut.String()
}

// TestSimulateProgress: a run longer than progressAfter shows progress on
// a terminal's stderr; not on a pipe or buffer (the default here).
func TestSimulateProgress(t *testing.T) {
	args := []string{"--hosts", "40", "--duration", "24h", "--mix", "healthy=2,dead=1,flapping=1"}
	// Negative control first: a buffer is not a terminal, so nothing.
	if _, errOut := runT(t, args...); errOut != "" {
		t.Fatalf("not a terminal: stderr %q", errOut)
	}
	defer func(a, k time.Duration, f func(io.Writer) bool) { progressAfter, progressTick, progressTTY = a, k, f }(progressAfter, progressTick, progressTTY)
	progressAfter, progressTick, progressTTY = 0, time.Millisecond, func(io.Writer) bool { return true }
	if _, errOut := runT(t, args...); !strings.Contains(errOut, "simulated (") || !strings.Contains(errOut, "of 25h0m0s") {
		t.Fatalf("terminal: stderr %q", errOut)
	}
}
