package main

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

// tlsFlagError says what went wrong with a backend's TLS and what fixes
// it: the library's Fix speaks of crypto/tls fields, the command's user of
// the backend's TLS file flags where it has them; a module that takes TLS
// from a connection string names its flag itself (WithSetting).
func tlsFlagError(f *backendFlags, te *tlsdiag.Error) error {
	fix := te.Fix
	if t := f.desc.tls(); t != nil {
		fix = cmp.Or(t.fix(f, te), te.Fix)
	}
	return fmt.Errorf("%s at %s: TLS failed: %s: %s", te.Backend, te.Endpoint, te.Reason, fix)
}

// A tlsFiles is a backend's TLS file flags (tlsFileFlags).
type tlsFiles struct{ ca, cert, key, url, on, off string }

// tlsFileFlags are backend's URL flag url, whose scheme on turns TLS on
// (off without), and its TLS file flags, --NAME-cacert, --NAME-cert and
// --NAME-key; signed says what the CA signed, for help. url's check first
// wants the client certificate with its key and, with files, each of url's
// items in the scheme on (a client may drop them for a plain URL without a
// word). The backend's open loads them (loadTLS); a TLS failure names them
// (fix).
func tlsFileFlags(backend string, url connFlag, on, off, signed string) []connFlag {
	t := &tlsFiles{backend + "-cacert", backend + "-cert", backend + "-key", url.name, on, off}
	env, check := "KVBREAKER_"+strings.ToUpper(backend)+"_", url.check
	url.tls, url.check = t, func(f *backendFlags, flag, v string) error {
		if (f.get(t.cert) == "") != (f.get(t.key) == "") {
			return usagef("--%s and --%s go together (mutual TLS): give both or neither", t.cert, t.key)
		}
		if (f.get(t.ca) != "" || f.get(t.cert) != "") && !strings.HasPrefix(v, on) {
			return usagef("--%s, --%s and --%s are for TLS: %s must start with %s", t.ca, t.cert, t.key, f.name(flag), on)
		}
		return check(f, flag, v)
	}
	return []connFlag{url,
		{name: t.ca, env: env + "CACERT", usage: backend + ": PEM `file` of the CA that signed " + signed, file: true},
		{name: t.cert, env: env + "CERT", usage: backend + ": PEM client certificate `file`, for mutual TLS (with --" + t.key + ")", file: true},
		{name: t.key, env: env + "KEY", usage: backend + ": PEM client key `file`, for mutual TLS (with --" + t.cert + ")", file: true},
	}
}

// fix says which of the TLS file flags fixes te, or "" for te's own Fix.
func (t *tlsFiles) fix(f *backendFlags, te *tlsdiag.Error) string {
	switch te.Kind {
	case tlsdiag.Untrusted:
		return "give the CA that signed it with " + f.flagAndEnv(t.ca)
	case tlsdiag.ClientCertRefused:
		return "give a client certificate and key its CA signed with " + f.flagAndEnv(t.cert) + " and " + f.flagAndEnv(t.key)
	case tlsdiag.ServerSpeaksTLS:
		return "use " + t.on + " in " + f.name(t.url) + ", with " + f.flagAndEnv(t.ca)
	case tlsdiag.ServerPlain:
		return "use " + t.off + " in " + f.name(t.url) + ", without --" + t.ca + ", --" + t.cert + " and --" + t.key
	}
	return ""
}
