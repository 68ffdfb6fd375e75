//go:build unix

package miniflare

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own, whose id is its PID.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup sends SIGKILL to the process group cmd leads (node and the
// workerd it spawned); ESRCH when it is already gone is ignored.
func killGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
