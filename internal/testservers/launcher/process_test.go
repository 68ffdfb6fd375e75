package launcher

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Launcher scripts for node -e.
const (
	// polite prints noise, then its ready line, and exits when stdin closes.
	polite = `process.stdout.write("noise\nREADY 42\n");
process.stdin.on("end", () => process.exit(0)); process.stdin.resume();`
	// stubborn is ready but ignores stdin.
	stubborn = `process.stdout.write("READY 7\n"); setInterval(() => {}, 1000);`
	// silent never gets ready, but exits when stdin closes.
	silent = `process.stdin.on("end", () => process.exit(0)); process.stdin.resume();`
	// crash fails before it is ready.
	crash = `process.stderr.write("  boom: EADDRINUSE\n"); process.exit(3);`
)

func node(t *testing.T, script string) *exec.Cmd {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is needed by the fixtures: install Node.js 20 or later")
	}
	return exec.Command("node", "-e", script)
}

func readyLine(line []byte) (string, bool) {
	v, ok := bytes.CutPrefix(line, []byte("READY "))
	return string(v), ok
}

// waitDone fails t unless p has exited within a bounded real time.
func waitDone(t *testing.T, p *Process, what string) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: launcher still running", what)
	}
	if p.PID() != 0 {
		t.Fatalf("%s: PID %d after exit, want 0", what, p.PID())
	}
}

func TestProcessStopEndsPoliteLauncher(t *testing.T) {
	cmd := node(t, polite)
	p, v, err := Start(t.Context(), "x", cmd, readyLine, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if v != "42" {
		t.Errorf("ready value %q, want 42", v)
	}
	if p.PID() != cmd.Process.Pid || p.PID() == 0 {
		t.Errorf("PID() = %d, want %d", p.PID(), cmd.Process.Pid)
	}
	select {
	case <-p.Done():
		t.Fatal("Done closed while the launcher runs")
	default:
	}
	stopped := make(chan struct{})
	go func() { p.Stop(time.Hour); close(stopped) }() // only closing stdin can end it in time
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not end a launcher that exits when stdin closes")
	}
	waitDone(t, p, "Stop")
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d, want 0 (it should exit by itself, not be killed)", code)
	}
	p.Stop(time.Hour) // idempotent
	p.Kill()
}

func TestProcessStopKillsStubbornLauncher(t *testing.T) {
	cmd := node(t, stubborn)
	p, _, err := Start(t.Context(), "x", cmd, readyLine, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p.Stop(200 * time.Millisecond)
	waitDone(t, p, "Stop")
	if cmd.ProcessState.Success() {
		t.Error("stubborn launcher exited cleanly; it should have been killed")
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("Stop returned after %v, before its grace of 200ms", d)
	}
}

func TestProcessKill(t *testing.T) {
	cmd := node(t, polite)
	p, _, err := Start(t.Context(), "x", cmd, readyLine, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	p.Kill()
	waitDone(t, p, "Kill")
	if cmd.ProcessState.Success() {
		t.Error("launcher exited cleanly after Kill; it should have been killed")
	}
}

func TestProcessSignal(t *testing.T) {
	cmd := node(t, stubborn)
	p, _, err := Start(t.Context(), "x", cmd, readyLine, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	if err := p.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	waitDone(t, p, "Signal(os.Kill)")
	if err := p.Signal(os.Kill); err == nil {
		t.Error("Signal to an exited launcher succeeded")
	}
}

func TestProcessEarlyExitReportsStderr(t *testing.T) {
	p, _, err := Start(t.Context(), "x", node(t, crash), readyLine, 30*time.Second)
	if p != nil || err == nil {
		t.Fatalf("Start = %v, %v; want an error", p, err)
	}
	if want := "x fixture: node exited before listening: boom: EADDRINUSE"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestProcessTimeout(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     []Option
		wantCode int // exit code: -1 killed, 0 exited on stdin's close
	}{
		{"kill", nil, -1},
		{"stop", []Option{StopOnTimeout(time.Hour)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := node(t, silent)
			p, _, err := Start(t.Context(), "x", cmd, readyLine, 300*time.Millisecond, tc.opts...)
			if p != nil || err == nil {
				t.Fatalf("Start = %v, %v; want an error", p, err)
			}
			if !strings.HasPrefix(err.Error(), "x fixture: not listening after 300ms") {
				t.Errorf("error %q", err)
			}
			if cmd.ProcessState == nil {
				t.Fatal("Start returned before the launcher had exited")
			}
			if code := cmd.ProcessState.ExitCode(); code != tc.wantCode {
				t.Errorf("exit code %d, want %d", code, tc.wantCode)
			}
		})
	}
}

func TestProcessStartFails(t *testing.T) {
	cmd := exec.Command("/nonexistent/kvbreaker-no-such-launcher")
	_, _, err := Start(t.Context(), "x", cmd, readyLine, time.Second)
	if err == nil || !strings.HasPrefix(err.Error(), "x fixture: start /nonexistent/kvbreaker-no-such-launcher: ") {
		t.Fatalf("error %v", err)
	}
}
