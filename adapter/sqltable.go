package adapter

import (
	"errors"
	"fmt"
)

// SQLTableName checks the name of a SQL store's table: 1 to maxLen
// lower-case letters, digits and '_', starting with a letter or '_'. Such
// a name means the same quoted or not, and names the same table on a
// server whose table names are case sensitive and on one whose are not.
// foundIn says where the server looks the table up ("in the connection's
// database"), for the refusal's advice.
func SQLTableName(name string, maxLen int, foundIn string) error {
	if name == "" || len(name) > maxLen {
		return fmt.Errorf("name a table of 1 to %d characters", maxLen)
	}
	for i, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || c == '_' || i > 0 && '0' <= c && c <= '9') {
			return errors.New("use lower-case letters, digits and '_', starting with a letter or '_' (the table is found " + foundIn + ")")
		}
	}
	return nil
}
