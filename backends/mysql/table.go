package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/kvbreaker/kvbreaker/adapter"
)

// maxTableName is MySQL's and MariaDB's limit on an identifier.
const maxTableName = 64

// validTableName checks a table name: a plain lower-case identifier, so
// that it names the same table on a server whose table names are case
// sensitive (lower_case_table_names=0, Linux's default) and on one whose
// are not.
func validTableName(name string) error {
	return adapter.SQLTableName(name, maxTableName, "in the connection's database")
}

// quoteIdent quotes a validated identifier.
func quoteIdent(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

// Schema returns the SQL that CreateTable runs for table, for those who
// migrate their own schema: the table and the index the purge uses. The
// column names and types are the store's contract; the statement is
// idempotent (CREATE TABLE IF NOT EXISTS) and runs in the connection's
// database.
func Schema(table string) (string, error) {
	if err := validTableName(table); err != nil {
		return "", fmt.Errorf("mysql: invalid table name %q: %v", table, err)
	}
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %[1]s (
	k          VARBINARY(%[2]d) NOT NULL,
	value      MEDIUMBLOB      NOT NULL,
	version    BIGINT          NOT NULL,
	expires_at DATETIME(6)     NOT NULL,
	purge_at   DATETIME(6)     NOT NULL,
	writes     VARBINARY(%[3]d)   NOT NULL,
	PRIMARY KEY (k),
	KEY purge_at (purge_at),
	CONSTRAINT %[4]s CHECK (version > 0)
) ENGINE=InnoDB;
`, quoteIdent(table), MaxKeyLen, 8*historyDepth, quoteIdent(table+"_version")), nil
}

// CreateTable creates table and its purge index in db's database if the
// table does not exist (Schema's SQL).
func CreateTable(ctx context.Context, db *sql.DB, table string) error {
	stmt, err := Schema(table)
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		return fmt.Errorf("mysql: create table %s: %w", table, err)
	}
	return nil
}
