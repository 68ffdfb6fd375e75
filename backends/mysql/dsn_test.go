package mysql_test

import (
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/mysql"
)

// TestCheckDSNRefusesInWords: the test server's DSN passes; a URL, a DSN
// that does not parse and one without a database are refused in words
// that never show the password.
func TestCheckDSNRefusesInWords(t *testing.T) {
	const pw = "s3cret-pw"
	for _, c := range []struct{ dsn, want string }{ // want "": passes
		{server.DSN(), ""},
		{"app:" + pw + "@tcp(db:3306)/app?parseTime=true", ""},
		{"mysql://app:" + pw + "@db:3306/app", "it is a URL"},
		{"app:" + pw + "@tcp(db:3306)", "want user[:password]@tcp(host:port)/database"},
		{"app:" + pw + "@tcp(db:3306)/", "names no database"},
		{"app:" + pw + "@tcp(db:3306)/app?timeout=soon", "want user[:password]@tcp(host:port)/database"},
	} {
		err := mysql.CheckDSN(c.dsn)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("CheckDSN(%q) = %v, want it to pass", c.dsn, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("CheckDSN(%q) = %v, want %q in it", c.dsn, err, c.want)
		case err != nil && strings.Contains(err.Error(), pw):
			t.Errorf("CheckDSN(%q) shows the password: %v", c.dsn, err)
		}
	}
}
