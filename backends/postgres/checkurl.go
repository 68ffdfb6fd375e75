package postgres

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// CheckURL checks a connection string as ParseConfig takes it (a
// postgres:// or postgresql:// URL, or keyword/value settings) without
// connecting, for a tool that validates its settings before it dials. Its
// error says what is wrong without quoting the string, which may carry a
// password: a URL of another scheme, or pgx's reason with what it quotes
// left out.
func CheckURL(connString string) error {
	if scheme, _, ok := strings.Cut(connString, "://"); ok && scheme != "" && !strings.ContainsAny(scheme, " =") &&
		scheme != "postgres" && scheme != "postgresql" {
		return errors.New("want a postgres:// URL, e.g. postgres://user@db:5432/app, or keyword/value settings (host=db user=app dbname=app)")
	}
	if _, err := pgxpool.ParseConfig(connString); err != nil {
		return errors.New(parseReason(err))
	}
	return nil
}
