//go:build !simulateonly

package main

import (
	"fmt"

	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

// tlsFlagError says what went wrong with a backend's TLS and which flag or
// variable fixes it: the library's Fix speaks of crypto/tls fields, the
// command's user of its flags (the backend's tlsFix).
func tlsFlagError(f *backendFlags, te *tlsdiag.Error) error {
	fix := te.Fix
	// f.desc, not a look-up in the registry: the registry holds the
	// openers that call this.
	if d := f.desc; d != nil && d.tlsFix != nil {
		if s := d.tlsFix(f, te); s != "" {
			fix = s
		}
	}
	return fmt.Errorf("%s at %s: TLS failed: %s: %s", te.Backend, te.Endpoint, te.Reason, fix)
}
