//go:build !unix

package miniflare

import "os/exec"

func ownGroup(*exec.Cmd) {}

func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

// lockFile is a no-op where flock is unavailable: only concurrent first
// installs race.
func lockFile(string) (func(), error) { return func() {}, nil }
