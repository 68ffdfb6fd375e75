package main

import (
	"cmp"
	"fmt"

	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

// tlsFlagError says what went wrong with a backend's TLS and which flag or
// variable fixes it: the library's Fix speaks of crypto/tls fields, the
// command's user of its flags (the backend's tlsFix, "" for the library's
// words).
func tlsFlagError(f *backendFlags, te *tlsdiag.Error) error {
	return fmt.Errorf("%s at %s: TLS failed: %s: %s", te.Backend, te.Endpoint, te.Reason, cmp.Or(f.desc.tlsFix(f, te), te.Fix))
}

// fileTLSFix is the tlsFix of a backend whose TLS comes from its CA,
// client certificate and key file flags, turned on by the scheme tlsScheme
// (plainScheme without TLS) of its URL flag.
func fileTLSFix(ca, cert, key, url, tlsScheme, plainScheme string) func(*backendFlags, *tlsdiag.Error) string {
	return func(f *backendFlags, te *tlsdiag.Error) string {
		switch te.Kind {
		case tlsdiag.Untrusted:
			return "give the CA that signed it with " + f.flagAndEnv(ca)
		case tlsdiag.ClientCertRefused:
			return "give a client certificate and key its CA signed with " + f.flagAndEnv(cert) + " and " + f.flagAndEnv(key)
		case tlsdiag.ServerSpeaksTLS:
			return "use " + tlsScheme + " in " + f.name(url) + ", with " + f.flagAndEnv(ca)
		case tlsdiag.ServerPlain:
			return "use " + plainScheme + " in " + f.name(url) + ", without --" + ca + ", --" + cert + " and --" + key
		}
		return ""
	}
}
