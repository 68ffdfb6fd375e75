package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// seqSuffix names the table's version sequence: <table>_version.
const seqSuffix = "_version"

// maxTableName leaves room for the sequence's and the index's suffixes within
// PostgreSQL's 63-byte identifiers.
const maxTableName = 50

// validTableName checks a table name: a plain lower-case identifier, so that
// it means the same quoted or not.
func validTableName(name string) error {
	if name == "" || len(name) > maxTableName {
		return fmt.Errorf("name a table of 1 to %d characters", maxTableName)
	}
	for i, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || c == '_' || i > 0 && '0' <= c && c <= '9') {
			return errors.New("use lower-case letters, digits and '_', starting with a letter or '_' (the table is found on the connection's search_path)")
		}
	}
	return nil
}

// quoteIdent quotes a validated identifier.
func quoteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// Schema returns the SQL that CreateTable runs for table, for those who
// migrate their own schema: the version sequence, the table and the index
// the purge uses. The column names and types are the store's contract.
func Schema(table string) (string, error) {
	if err := validTableName(table); err != nil {
		return "", fmt.Errorf("postgres: invalid table name %q: %v", table, err)
	}
	t := quoteIdent(table)
	return fmt.Sprintf(`CREATE SEQUENCE IF NOT EXISTS %[2]s AS bigint;
CREATE TABLE IF NOT EXISTS %[1]s (
	key        text COLLATE "C" PRIMARY KEY,
	value      bytea       NOT NULL,
	version    bigint      NOT NULL,
	expires_at timestamptz NOT NULL,
	purge_at   timestamptz NOT NULL,
	writes     bigint[]    NOT NULL,
	versions   bigint[]    NOT NULL
);
CREATE INDEX IF NOT EXISTS %[3]s ON %[1]s (purge_at);
`, t, quoteIdent(table+seqSuffix), quoteIdent(table+"_purge_at")), nil
}

// CreateTable creates table, its version sequence and its expiry index if
// they do not exist (Schema's SQL, in one transaction).
func CreateTable(ctx context.Context, pool *pgxpool.Pool, table string) error {
	sql, err := Schema(table)
	if err != nil {
		return err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: create table %s: %w", table, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
	if _, err := tx.Exec(ctx, sql); err != nil {
		return fmt.Errorf("postgres: create table %s: %w", table, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: create table %s: %w", table, err)
	}
	return nil
}
