package adapter_test

import (
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/adapter"
)

// TestSQLTableName: plain lower-case identifiers up to the limit pass; an
// empty or long name is refused naming the limit, and an upper-case
// letter, a leading digit or another character naming where the table is
// found.
func TestSQLTableName(t *testing.T) {
	for _, name := range []string{"a", "z", "_", "kv_2", "a0", "a9", strings.Repeat("x", 8)} {
		if err := adapter.SQLTableName(name, 8, "here"); err != nil {
			t.Errorf("SQLTableName(%q) = %v, want nil", name, err)
		}
	}
	for _, tc := range []struct{ name, want string }{
		{"", "name a table of 1 to 8 characters"},
		{strings.Repeat("x", 9), "name a table of 1 to 8 characters"},
		{"Kv", "use lower-case letters, digits and '_', starting with a letter or '_' (the table is found here)"},
		{"2kv", "(the table is found here)"},
		{"k-v", "(the table is found here)"},
		{`k"v`, "(the table is found here)"},
		{"kvé", "(the table is found here)"},
	} {
		if err := adapter.SQLTableName(tc.name, 8, "here"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SQLTableName(%q) = %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}
