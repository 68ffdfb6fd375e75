//go:build !linux

package redistest

import "os/exec"

// dieWithParent does nothing where there is no parent-death signal: a test
// binary that crashes leaves its servers running.
func dieWithParent(*exec.Cmd) {}
