//go:build !unix

package dynalite

import "os"

// Pause and Resume are unsupported here.
var sigStop, sigCont os.Signal
