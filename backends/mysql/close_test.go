package mysql_test

import (
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/mysql"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// TestCallsAfterCloseFail: after Close every call fails with a
// *driver.OpError that matches ErrClosed, and the row written before it is
// still there for another Store over the same pool (Close leaves the pool
// to its caller). The control is the same calls before Close, which
// succeed against MariaDB.
func TestCallsAfterCloseFail(t *testing.T) {
	s := newRaw(t)
	more := func(errs map[string]error) {
		_, errs["Purge"] = s.Purge(t.Context())
		errs["Ping"] = s.Ping(t.Context())
	}
	backendtest.ClosedKeepsRows(t, s, uniquePrefix(t)+"k", more, mysql.ErrClosed, func() backendtest.KeyPurger {
		other, err := mysql.New(s.DB(), table)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { other.Close() })
		return other
	})
}
