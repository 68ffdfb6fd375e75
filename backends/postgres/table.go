package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker/adapter"
)

// seqSuffix names the table's version sequence: <table>_version.
const seqSuffix = "_version"

// maxTableName leaves room for the sequence's and the index's suffixes within
// PostgreSQL's 63-byte identifiers.
const maxTableName = 50

// validTableName checks a table name: a plain lower-case identifier, so that
// it means the same quoted or not.
func validTableName(name string) error {
	return adapter.SQLTableName(name, maxTableName, "on the connection's search_path")
}

// quoteIdent quotes a validated identifier.
func quoteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// Suffixes of the names derived from the table's: its notification
// channel, and the trigger function and triggers that notify it.
const (
	channelSuffix  = "_changes"
	notifySuffix   = "_notify"
	truncateSuffix = "_truncate"
)

// Channel returns the NOTIFY channel table's trigger notifies (see
// "Following" in the package doc): the table's name and "_changes", at most
// 58 bytes, within PostgreSQL's 63-byte identifiers (a longer channel name
// is an error for pg_notify and is truncated by LISTEN).
func Channel(table string) string { return table + channelSuffix }

// maxNotifyKey is the longest key whose name a notification carries whole:
// a payload must stay below 8000 bytes, or pg_notify fails the write.
const maxNotifyKey = 7900

// Schema returns the SQL that CreateTable runs for table, for those who
// migrate their own schema: the version sequence, the table, the index the
// purge uses, and the trigger function and triggers that Follow needs
// (<table>_notify, called by the row trigger <table>_notify and the
// statement trigger <table>_truncate). The column names and types are the
// store's contract. Every statement is idempotent: on a table made by an
// earlier version it adds what is missing and replaces the function.
func Schema(table string) (string, error) {
	if err := validTableName(table); err != nil {
		return "", fmt.Errorf("postgres: invalid table name %q: %v", table, err)
	}
	t := quoteIdent(table)
	fn := quoteIdent(table + notifySuffix)
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
-- Follow's feed: each change of a row notifies channel %[5]s with its key.
CREATE OR REPLACE FUNCTION %[4]s() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
	IF TG_LEVEL = 'STATEMENT' THEN
		PERFORM pg_notify(%[6]s, '*'); -- TRUNCATE: every follower resynchronises
		RETURN NULL;
	END IF;
	IF TG_OP = 'UPDATE' AND NEW.key = OLD.key AND NEW.version = OLD.version
		AND NEW.expires_at = OLD.expires_at AND NEW.value = OLD.value THEN
		RETURN NULL; -- a failed compare rewrote the row unchanged
	END IF;
	IF TG_OP = 'DELETE' AND OLD.expires_at = '-infinity' THEN
		RETURN NULL; -- a purged tombstone: its delete was notified
	END IF;
	IF TG_OP <> 'INSERT' THEN
		PERFORM pg_notify(%[6]s, CASE WHEN octet_length(OLD.key) <= %[7]d
			THEN 'k' || OLD.key ELSE '~' || left(OLD.key, 1000) END);
	END IF;
	IF TG_OP = 'INSERT' OR TG_OP = 'UPDATE' AND NEW.key <> OLD.key THEN
		PERFORM pg_notify(%[6]s, CASE WHEN octet_length(NEW.key) <= %[7]d
			THEN 'k' || NEW.key ELSE '~' || left(NEW.key, 1000) END);
	END IF;
	RETURN NULL;
END
$fn$;
DO $do$ BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = %[8]s::regclass AND tgname = %[9]s) THEN
		CREATE TRIGGER %[10]s AFTER INSERT OR UPDATE OR DELETE ON %[1]s
			FOR EACH ROW EXECUTE FUNCTION %[4]s();
	END IF;
	IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = %[8]s::regclass AND tgname = %[11]s) THEN
		CREATE TRIGGER %[12]s AFTER TRUNCATE ON %[1]s
			FOR EACH STATEMENT EXECUTE FUNCTION %[4]s();
	END IF;
END $do$;
`, t, quoteIdent(table+seqSuffix), quoteIdent(table+"_purge_at"), fn,
		Channel(table), quoteLiteral(Channel(table)), maxNotifyKey,
		quoteLiteral(t), quoteLiteral(table+notifySuffix), quoteIdent(table+notifySuffix),
		quoteLiteral(table+truncateSuffix), quoteIdent(table+truncateSuffix)), nil
}

// quoteLiteral quotes a string as an SQL literal.
func quoteLiteral(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }

// CreateTable creates table, its version sequence, its expiry index and
// the trigger Follow needs if they do not exist, and replaces the trigger's
// function (Schema's SQL, in one transaction). On a table made by an
// earlier version it adds the trigger; that needs the table's owner.
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
