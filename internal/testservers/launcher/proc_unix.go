//go:build unix

package launcher

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own, whose id is its PID.
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// killGroup sends SIGKILL to the process group cmd leads (the launcher and
// what it spawned); ESRCH when it is already gone is ignored.
func killGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
