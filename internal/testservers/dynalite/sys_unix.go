//go:build unix

package dynalite

import (
	"os"
	"syscall"
)

// Signals for Pause and Resume.
var sigStop, sigCont os.Signal = syscall.SIGSTOP, syscall.SIGCONT
