package launcher

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// spawner starts a child that outlives it unless its process group is
// killed, and reports the child's PID as its ready value.
const spawner = `const c = require("child_process").spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
process.stdout.write("READY " + c.pid + "\n");
process.stdin.on("end", () => process.exit(0)); process.stdin.resume();`

// gone reports whether pid has exited (absent or a zombie).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || strings.HasPrefix(s[i+1:], " Z")
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !gone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d of the launcher survived", pid)
		}
		time.Sleep(20 * time.Millisecond) // the kernel's, not our, logic
	}
}

func TestProcessGroup(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(*Process)
	}{
		{"stop", func(p *Process) { p.Stop(time.Hour) }},
		{"kill", (*Process).Kill},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, v, err := Start(t.Context(), "x", node(t, spawner), readyLine, 30*time.Second, Group())
			if err != nil {
				t.Fatal(err)
			}
			child, err := strconv.Atoi(v)
			if err != nil {
				p.Kill()
				t.Fatalf("ready value %q: %v", v, err)
			}
			if gone(child) {
				p.Kill()
				t.Fatalf("child %d not running", child)
			}
			t.Cleanup(func() {
				if !gone(child) { // the test failed: leave nothing behind
					_ = syscall.Kill(child, syscall.SIGKILL)
				}
			})
			tc.end(p)
			waitDone(t, p, tc.name)
			waitGone(t, child)
		})
	}
}
