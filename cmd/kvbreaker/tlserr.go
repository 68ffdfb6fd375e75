//go:build !simulateonly

package main

import (
	"fmt"

	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

// tlsFlagError says what went wrong with a backend's TLS and which flag or
// variable fixes it: the library's Fix speaks of crypto/tls fields, the
// command's user of its flags.
func tlsFlagError(f *backendFlags, te *tlsdiag.Error) error {
	flag := func(name string) string { return "--" + name + " (or $" + envOf(name) + ")" }
	fix := te.Fix
	switch te.Backend {
	case "etcd":
		switch te.Kind {
		case tlsdiag.Untrusted:
			fix = "give the CA that signed it with " + flag("etcd-cacert")
		case tlsdiag.ClientCertRefused:
			fix = "give a client certificate and key its CA signed with " + flag("etcd-cert") + " and " + flag("etcd-key")
		case tlsdiag.ServerSpeaksTLS:
			fix = "use https:// in " + f.name("etcd-endpoints") + ", with " + flag("etcd-cacert")
		case tlsdiag.ServerPlain:
			fix = "use http:// in " + f.name("etcd-endpoints") + ", without --etcd-cacert, --etcd-cert and --etcd-key"
		}
	case "redis":
		switch te.Kind {
		case tlsdiag.Untrusted:
			fix = "give the CA that signed it with " + flag("redis-cacert")
		case tlsdiag.ClientCertRefused:
			fix = "give a client certificate and key its CA signed with " + flag("redis-cert") + " and " + flag("redis-key")
		case tlsdiag.ServerSpeaksTLS:
			fix = "use rediss:// in " + f.name("redis-url") + ", with " + flag("redis-cacert")
		case tlsdiag.ServerPlain:
			fix = "use redis:// in " + f.name("redis-url")
		}
	case "postgres":
		switch te.Kind {
		case tlsdiag.Untrusted:
			fix = "give the CA that signed it as sslrootcert= in " + f.name("postgres-url") + " (postgres://…?sslmode=verify-full&sslrootcert=ca.pem) or $PGSSLROOTCERT"
		default:
			fix += " (in " + f.name("postgres-url") + " or the PGSSL* variables)"
		}
	}
	return fmt.Errorf("%s at %s: TLS failed: %s: %s", te.Backend, te.Endpoint, te.Reason, fix)
}
