package serve

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
)

// Permission is a set of the actions a caller may take.
type Permission uint8

// The permissions a token or a client certificate can carry.
const (
	// PermDecide: ask before a send (POST /v1/decide).
	PermDecide Permission = 1 << iota
	// PermReport: report outcomes and abandon probes (POST /v1/outcomes,
	// POST /v1/abandon).
	PermReport
	// PermRead: list and inspect circuits, the status feed.
	PermRead
	// PermReset: force-close a circuit (DELETE /v1/circuits/{host}), an
	// operator's action.
	PermReset
	// PermMetrics: scrape the Breaker's metrics (GET /metrics), for
	// Prometheus; they carry no delivery host, but whether a fleet is
	// failing is still not for anyone who can reach the port.
	PermMetrics
)

var permNames = []struct {
	p    Permission
	name string
}{{PermDecide, "decide"}, {PermReport, "report"}, {PermRead, "read"}, {PermReset, "reset"}, {PermMetrics, "metrics"}}

// String lists the permissions, comma-separated.
func (p Permission) String() string {
	var out []string
	for _, n := range permNames {
		if p&n.p != 0 {
			out = append(out, n.name)
		}
	}
	return strings.Join(out, ",")
}

// ParsePermissions reads a comma-separated list of decide, report, read,
// reset and metrics.
func ParsePermissions(s string) (Permission, error) {
	var p Permission
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		found := false
		for _, n := range permNames {
			if part == n.name {
				p |= n.p
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("permission %q: want decide, report, read, reset or metrics, comma-separated", part)
		}
	}
	return p, nil
}

// Token is one bearer token and what it may do. Only its SHA-256 digest is
// kept, so a heap dump or a %v never shows it.
type Token struct {
	// Name says whose token it is, for logs.
	Name   string
	Perms  Permission
	digest [sha256.Size]byte
}

// ParseTokens reads tokens, one a line: "NAME PERMISSIONS TOKEN", e.g.
// "node-workers decide,report 6f1c…". Blank lines and lines starting with
// '#' are skipped. where names the source for messages ("--tokens-file
// /etc/kvbreaker/tokens"); no message quotes a token.
func ParseTokens(text, where string) ([]Token, error) {
	var toks []Token
	var errs []error
	seen := map[[sha256.Size]byte]string{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			errs = append(errs, fmt.Errorf("%s line %d: has %d fields: want NAME PERMISSIONS TOKEN, e.g. \"workers decide,report <token>\"", where, i+1, len(f)))
			continue
		}
		perms, err := ParsePermissions(f[1])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s line %d (%s): %v", where, i+1, f[0], err))
			continue
		}
		if len(f[2]) < 16 {
			errs = append(errs, fmt.Errorf("%s line %d (%s): the token has %d characters: want at least 16 (e.g. openssl rand -hex 32)", where, i+1, f[0], len(f[2])))
			continue
		}
		d := sha256.Sum256([]byte(f[2]))
		if other, ok := seen[d]; ok {
			errs = append(errs, fmt.Errorf("%s line %d (%s): the same token as %s: give each its own", where, i+1, f[0], other))
			continue
		}
		seen[d] = f[0]
		toks = append(toks, Token{Name: f[0], Perms: perms, digest: d})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return toks, nil
}

// NewToken is a token named name with perms (tests, programs embedding
// the server).
func NewToken(name string, perms Permission, secret string) Token {
	return Token{Name: name, Perms: perms, digest: sha256.Sum256([]byte(secret))}
}
