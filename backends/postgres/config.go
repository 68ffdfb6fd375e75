package postgres

import (
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker/driver"
)

// ParseConfig is pgxpool.ParseConfig (a postgres:// URL or a keyword/value
// string, with pgx's and pgxpool's settings) for a pool to give New through
// pgxpool.NewWithConfig, with errors that never show a secret: pgx's own
// quote the connection string, masking passwords on a best-effort basis
// that misses some a server accepts ("password = secret", with spaces). Its
// error is a *driver.OptionError that shows a URL without its userinfo and
// fragment and with every query value masked, a keyword/value string not at
// all, and pgx's reason without the connection string and without what it
// quotes.
func ParseConfig(connString string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err == nil {
		return cfg, nil
	}
	return nil, &driver.OptionError{Backend: "postgres", Option: "connection string", Value: redactConnString(connString),
		Fix: "give postgres://[user[:password]@]host[:port]/database[?options] or a keyword/value string, with reserved characters in the password %-escaped (" + parseReason(err) + ")"}
}

// parseReason is why pgx refused a connection string, without the string
// and without what the reason quotes (either may carry a password).
func parseReason(err error) string {
	reason := err.Error()
	if i := strings.LastIndex(reason, "`: "); i >= 0 && strings.HasPrefix(reason, "cannot parse `") {
		reason = reason[i+len("`: "):]
	} else {
		reason = "pgx refused it"
	}
	return quoted.ReplaceAllString(reason, "…")
}

// quoted matches a string as %q writes it.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// redactConnString shows a connection string for messages: a URL without
// its userinfo and fragment and with every query value masked; nothing of
// anything else.
func redactConnString(s string) string {
	scheme, _, _ := strings.Cut(s, "://")
	if scheme != "postgres" && scheme != "postgresql" {
		return "(not a postgres:// URL, not shown)"
	}
	u, err := url.Parse(s)
	if err != nil {
		return scheme + "://… (malformed, not shown)"
	}
	u.User = nil
	u.Fragment, u.RawFragment = "", ""
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"xxxxx"}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}
