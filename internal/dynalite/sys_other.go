//go:build !unix

package dynalite

import "os"

// Pause and Resume are unsupported here.
var sigStop, sigCont os.Signal

// lockFile is a no-op where flock is unavailable: run one test binary at a
// time on first install.
func lockFile(string) (func(), error) { return func() {}, nil }
