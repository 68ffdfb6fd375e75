package sqlite

// SchemaScript is Schema as a file to run by hand (sqlite3 FILE <
// script): headed by comments, with the journal mode the store sets, which
// the file keeps.
const SchemaScript = `-- The tables kvbreaker's SQLite store uses (sqlite.Schema), as "kvbreaker init" creates them.
-- The store also sets journal_mode=WAL, which the file keeps.
PRAGMA journal_mode = WAL;
` + Schema + "\n"
