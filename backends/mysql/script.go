package mysql

import (
	"fmt"
	"strings"
)

// SchemaScript is Schema for table as a file an administrator or a
// migration tool runs by hand (the mysql client, in the fleet's database):
// the SQL, headed by comments that say what the fleet's user must be
// granted.
func SchemaScript(table string) (string, error) {
	stmt, err := Schema(table)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(`-- The table kvbreaker's MySQL/MariaDB store uses (mysql.Schema %q), as "kvbreaker init" creates it.
-- Run it in the fleet's database; the fleet's user needs SELECT, INSERT, UPDATE, DELETE on it.
%s`, table, strings.TrimLeft(stmt, "\n")), nil
}
