package mysql

import (
	"errors"
	"strings"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
)

// TestExplainNamesTheSettingAndKeepsTheError: each refusal a server gives
// is explained with the setting the caller named (or "the data source
// name"), never shows the password, and still unwraps to the server's
// *MySQLError; an error that is not the server's is only prefixed.
func TestExplainNamesTheSettingAndKeepsTheError(t *testing.T) {
	cfg, err := gomysql.ParseDSN("app:s3cret@tcp(db.invalid:3306)/appdb")
	if err != nil {
		t.Fatal(err)
	}
	for _, number := range []uint16{1045, 1049, 1142, 1205} {
		me := &gomysql.MySQLError{Number: number, Message: "refused"}
		for _, setting := range []string{"$DATABASE_DSN", ""} {
			got := Explain(me, cfg, setting)
			msg := got.Error()
			if !strings.HasPrefix(msg, "mysql at db.invalid:3306") || !strings.Contains(msg, "refused") || strings.Contains(msg, "s3cret") {
				t.Errorf("%d, setting %q: %q", number, setting, msg)
			}
			if _, ok := errors.AsType[*gomysql.MySQLError](got); !ok {
				t.Errorf("%d: %q does not unwrap to the *MySQLError", number, msg)
			}
			named := setting
			if named == "" {
				named = "the data source name"
			}
			// The refusals that the data source name fixes name it.
			if (number == 1045 || number == 1049) && !strings.Contains(msg, named) {
				t.Errorf("%d: %q does not name %q", number, msg, named)
			}
		}
	}
	reset := errors.New("connection reset by peer")
	if got := Explain(reset, cfg, ""); got.Error() != "mysql at db.invalid:3306: connection reset by peer" || !errors.Is(got, reset) {
		t.Errorf("another error: %q", got)
	}
}
