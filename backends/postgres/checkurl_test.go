package postgres_test

import (
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
)

// TestCheckURLRefusesInWords: the test server's URL and keyword/value
// settings pass; each refusal says why and never shows the password.
func TestCheckURLRefusesInWords(t *testing.T) {
	const pw = "s3cret-pw"
	for _, c := range []struct{ conn, want string }{ // want "": passes
		{server.URL(), ""},
		{"postgresql://app:" + pw + "@db:5432/app", ""},
		{"host=db user=app dbname=app password=" + pw, ""},
		{"http://app:" + pw + "@db:5432/app", "want a postgres:// URL"},
		{"mysql://app:" + pw + "@db/app", "want a postgres:// URL"},
		{"postgres://app:" + pw + "@db:99999999/app", "invalid port"},
		{"host=db password=" + pw + " sslmode=sometimes", "sslmode"},
	} {
		err := postgres.CheckURL(c.conn)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("CheckURL(%q) = %v, want it to pass", c.conn, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("CheckURL(%q) = %v, want %q in it", c.conn, err, c.want)
		case err != nil && strings.Contains(err.Error(), pw):
			t.Errorf("CheckURL(%q) shows the password: %v", c.conn, err)
		}
	}
}
