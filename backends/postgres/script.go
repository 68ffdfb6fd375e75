package postgres

import "fmt"

// SchemaScript is Schema for table as a file a database owner or a
// migration tool runs by hand (psql): the SQL, headed by comments that say
// what the fleet's user must be granted and which channel the trigger
// notifies.
func SchemaScript(table string) (string, error) {
	sql, err := Schema(table)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(`-- The table kvbreaker's PostgreSQL store uses (postgres.Schema %q), as "kvbreaker init" creates it.
-- The fleet's user needs SELECT, INSERT, UPDATE, DELETE on it and USAGE on the sequence.
-- Its trigger notifies channel %s of each change, for followers (postgres.Store.Follow).
%s`, table, Channel(table), sql), nil
}
