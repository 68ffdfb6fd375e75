package robustness

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
)

// TestCallTimeStalls: a call over its limit is a violation unless stalls
// of the process cover its overrun; then it is inconclusive. A stall that
// covers only part of the overrun, or lies outside the call, leaves the
// violation.
func TestCallTimeStalls(t *testing.T) {
	const limit = 1500 * time.Millisecond
	call := Event{Worker: 2, Op: OpAllow, Key: "h2", Start: 10 * time.Second, End: 10*time.Second + 1870*time.Millisecond}
	for _, tc := range []struct {
		name         string
		stalls       []Stall
		inconclusive bool
	}{
		{"no stall", nil, false},
		{"stall covers the overrun", []Stall{{From: 10*time.Second + 20*time.Millisecond, To: 10*time.Second + 1860*time.Millisecond}}, true},
		{"two stalls cover it together", []Stall{{From: 10*time.Second + 100*time.Millisecond, To: 10*time.Second + 300*time.Millisecond}, {From: 10*time.Second + 1000*time.Millisecond, To: 10*time.Second + 1200*time.Millisecond}}, true},
		{"stall shorter than the overrun", []Stall{{From: 10*time.Second + 100*time.Millisecond, To: 10*time.Second + 300*time.Millisecond}}, false},
		{"stall outside the call", []Stall{{From: 5 * time.Second, To: 8 * time.Second}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Store: "test", Seed: 1, Settings: kvbreaker.Settings{CallTimeout: time.Second}, Slack: 500 * time.Millisecond}
			c := checker{cfg: &cfg, h: &History{Events: []Event{call}, Stalls: tc.stalls}}
			c.callTime()
			if cfg.Settings.CallTimeout+cfg.Slack != limit {
				t.Fatalf("limit %v, want %v", cfg.Settings.CallTimeout+cfg.Slack, limit)
			}
			if tc.inconclusive {
				if len(c.violations) != 0 || len(c.inconclusive) != 1 || !strings.Contains(c.inconclusive[0], "with the process stalled") {
					t.Errorf("violations %v, inconclusive %q; want the call inconclusive only", c.violations, c.inconclusive)
				}
			} else if len(c.violations) != 1 || len(c.inconclusive) != 0 {
				t.Errorf("violations %v, inconclusive %q; want the call a violation", c.violations, c.inconclusive)
			}
		})
	}
}

// TestWatchStallsRecordsAStop: stopping the whole process (SIGSTOP from a
// child, SIGCONT 300 ms later) is recorded as a stall that spans the stop;
// running on is not.
func TestWatchStallsRecordsAStop(t *testing.T) {
	h := &History{start: time.Now()}
	stop := make(chan struct{})
	done := make(chan struct{})
	before := h.since()
	go func() { defer close(done); h.watchStalls(before, stop, nil) }()
	out, err := exec.Command("sh", "-c", "kill -STOP "+strconv.Itoa(os.Getpid())+"; sleep 0.3; kill -CONT "+strconv.Itoa(os.Getpid())).CombinedOutput()
	if err != nil {
		t.Fatalf("stop and continue the process: %v\n%s", err, out)
	}
	after := h.since()
	// The first tick after the continue records the stall: poll for it.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		h.mu.Lock()
		n := len(h.Stalls)
		h.mu.Unlock()
		if n > 0 {
			break
		}
	}
	close(stop)
	<-done
	if s := h.stalled(before, after); s < 250*time.Millisecond {
		t.Errorf("stalls %v cover %v of the 300 ms stop (%v to %v), want at least 250 ms", h.Stalls, s, before, after)
	}
}

func TestStalledSumsOverlaps(t *testing.T) {
	h := &History{Stalls: []Stall{{From: 1 * time.Second, To: 2 * time.Second}, {From: 3 * time.Second, To: 5 * time.Second}}}
	for _, tc := range []struct{ from, to, want time.Duration }{
		{0, 10 * time.Second, 3 * time.Second},
		{1500 * time.Millisecond, 4 * time.Second, 1500 * time.Millisecond},
		{2 * time.Second, 3 * time.Second, 0},
		{6 * time.Second, 7 * time.Second, 0},
	} {
		if got := h.stalled(tc.from, tc.to); got != tc.want {
			t.Errorf("stalled(%v, %v) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}

// TestRecoveryUnseenIsInconclusive: after the recovery bound, a host no
// worker asked about (the run ended first) is inconclusive; one whose every
// Allow failed is a violation; one answered is neither.
func TestRecoveryUnseenIsInconclusive(t *testing.T) {
	cfg := Config{Store: "test", Seed: 1, Settings: kvbreaker.Settings{RecoveryDelay: time.Second}, Slack: time.Second}
	h := &History{Heal: 10 * time.Second, End: 20 * time.Second, Events: []Event{
		{Worker: 0, Op: OpAllow, Key: "h0", Start: 15 * time.Second, End: 15*time.Second + time.Millisecond, Decision: "send"},
		{Worker: 1, Op: OpAllow, Key: "h1", Start: 15 * time.Second, End: 15*time.Second + time.Millisecond, Err: "unreachable"},
	}}
	names := []string{"h0", "h1", "h2"}
	c := checker{cfg: &cfg, h: h, hosts: make([]hostPlan, 3), hostName: func(i int) string { return names[i] }}
	c.recovery()
	if len(c.violations) != 1 || !strings.Contains(c.violations[0].Error(), "no Allow on h1 answered without error") || strings.Contains(c.violations[0].Error(), "h0") || strings.Contains(c.violations[0].Error(), "h2") {
		t.Errorf("violations %v, want h1's failed Allows only", c.violations)
	}
	if len(c.inconclusive) != 1 || !strings.Contains(c.inconclusive[0], "no Allow on h2 made") {
		t.Errorf("inconclusive %q, want h2, which no worker asked about", c.inconclusive)
	}
}
