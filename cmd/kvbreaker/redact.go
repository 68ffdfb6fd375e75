package main

import (
	"cmp"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// Secrets never appear in the command's output or errors. Each message
// shows a connection string redacted (redactURL, redactDSN); and as a last
// guard, execute replaces in the error it prints every secret the command
// line and environment carry (commandSecrets), in case a library quoted
// one.

// redacted replaces a secret's value in what the command shows.
const redacted = "redacted"

// sensitiveParam reports whether a URL parameter or keyword may carry a
// credential: password=, sslpassword=, token=, secret=, api_key=, ….
func sensitiveParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"pass", "pwd", "secret", "token", "key", "auth", "credential", "signature"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// redactURL is a URL for messages: without user information, a sensitive
// parameter's value replaced. A URL that does not parse is shown as its
// scheme only: its parts cannot be told apart, so any may be a secret.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		// "localhost:8000", "example.com": no place for a secret in them.
		if !strings.ContainsAny(raw, "@=?#&;%'\"\\ \t") {
			return raw
		}
		if scheme, _, ok := strings.Cut(raw, "://"); ok && scheme != "" && !strings.ContainsAny(scheme, "@:/= ") {
			return scheme + "://… (not shown: it does not parse)"
		}
		return "… (not shown: it does not parse as a URL)"
	}
	u.User = nil
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			u.RawQuery = redacted
		} else {
			changed := false
			for k := range q {
				if sensitiveParam(k) {
					q[k] = []string{redacted}
					changed = true
				}
			}
			if changed {
				u.RawQuery = q.Encode()
			}
		}
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// isURL reports whether raw is written as a URL (scheme://…) rather than
// as a keyword/value connection string.
func isURL(raw string) bool {
	scheme, _, ok := strings.Cut(raw, "://")
	return ok && scheme != "" && !strings.ContainsAny(scheme, " =")
}

// kvSetting matches one keyword=value of a libpq keyword/value
// connection string (libpq's syntax: spaces around "=", a value in single
// quotes with backslash escapes).
var kvSetting = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*=\s*('((?:[^'\\]|\\.)*)'|\S*)`)

// redactDSN is a libpq connection string for messages: a URL as
// redactURL shows it; a keyword/value string with the values of sensitive
// keywords (password, sslpassword) replaced, or not at all if it has no
// keyword=value form.
func redactDSN(raw string) string {
	if isURL(raw) {
		return redactURL(raw)
	}
	ms := kvSetting.FindAllStringSubmatchIndex(raw, -1)
	if len(ms) == 0 {
		return "(a connection string, not shown)"
	}
	var b strings.Builder
	last := 0
	for _, m := range ms {
		if strings.TrimSpace(raw[last:m[0]]) != "" {
			// Text outside keyword=value pairs: it may be a stray secret.
			return "(a keyword/value connection string, not shown: it does not parse)"
		}
		b.WriteString(raw[last:m[0]])
		key := raw[m[2]:m[3]]
		if sensitiveParam(key) {
			b.WriteString(key + "=" + redacted)
		} else {
			b.WriteString(raw[m[0]:m[1]])
		}
		last = m[1]
	}
	if strings.TrimSpace(raw[last:]) != "" {
		return "(a keyword/value connection string, not shown: it does not parse)"
	}
	return b.String()
}

// secretsIn lists the credentials raw (a URL, or a keyword/value
// connection string) carries: a password in its user information, the
// values of its sensitive parameters or keywords; each also unescaped.
func secretsIn(raw string) []string {
	var out []string
	add := func(s string) {
		out = append(out, s)
		if u, err := url.PathUnescape(s); err == nil && u != s {
			out = append(out, u)
		}
		if u, err := url.QueryUnescape(s); err == nil && u != s {
			out = append(out, u)
		}
	}
	if _, rest, ok := strings.Cut(raw, "://"); ok {
		authority := rest
		if i := strings.IndexAny(authority, "?#"); i >= 0 {
			authority = authority[:i]
		}
		if i := strings.LastIndex(authority, "@"); i >= 0 {
			if _, pw, ok := strings.Cut(authority[:i], ":"); ok {
				add(pw)
			}
		}
		if _, query, ok := strings.Cut(rest, "?"); ok {
			query, _, _ = strings.Cut(query, "#")
			for _, kv := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
				k, v, _ := strings.Cut(kv, "=")
				if uk, err := url.QueryUnescape(k); err == nil {
					k = uk
				}
				if sensitiveParam(k) {
					add(v)
				}
			}
		}
	}
	for _, m := range kvSetting.FindAllStringSubmatch(raw, -1) {
		if !sensitiveParam(m[1]) {
			continue
		}
		v := m[2]
		if strings.HasPrefix(v, "'") {
			v = strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(m[3])
			out = append(out, m[3])
		}
		add(v)
	}
	return out
}

// commandSecrets lists the credentials the command line (fs, the command
// that ran; nil if none) and the environment carry.
func commandSecrets(fs *pflag.FlagSet) []string {
	var raws, secretEnv []string
	for _, d := range registry {
		for _, c := range d.flags {
			if !c.secret {
				continue
			}
			if fs != nil {
				if f := fs.Lookup(c.name); f != nil {
					raws = append(raws, f.Value.String())
				}
			}
			raws = append(raws, os.Getenv(c.env))
		}
		secretEnv = append(secretEnv, d.secretEnv...)
	}
	var out []string
	for _, raw := range raws {
		for part := range strings.SplitSeq(raw, ",") {
			out = append(out, secretsIn(part)...)
		}
		out = append(out, secretsIn(raw)...)
	}
	for _, e := range secretEnv {
		out = append(out, os.Getenv(e))
	}
	// Too short to replace without mangling the message (and no secret).
	out = slices.DeleteFunc(out, func(s string) bool { return len(strings.TrimSpace(s)) < 4 })
	// Longest first, so that a secret containing another goes whole.
	slices.SortFunc(out, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return slices.Compact(out)
}

// scrub replaces every secret in msg.
func scrub(msg string, secrets []string) string {
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, redacted)
	}
	return msg
}
