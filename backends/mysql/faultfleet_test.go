package mysql_test

import (
	"fmt"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/mysql"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/faultfleet"
)

// TestFaultFleet runs a Breaker fleet over MariaDB through a faultproxy
// that loses and fails answers of applied statements, delays, resets and
// blackholes, and checks with faultfleet that no failure is counted twice,
// every probe winner is told Probe, every opening and transition is
// reported once, and every call returns within CallTimeout. Each worker has
// its own pool, as a separate process would.
func TestFaultFleet(t *testing.T) {
	prefix := uniquePrefix(t)
	faultfleet.Proxied(t, server.Addr(), prefix, isolate(t, newRaw(t), prefix), func(addr string) (driver.Store, error) {
		db := newDB(t, server.DSNFor(addr))
		db.SetMaxOpenConns(2)
		s, err := mysql.New(db, table, mysql.WithEndpoint(addr))
		if err == nil {
			t.Cleanup(func() { s.Close() })
		}
		return s, err
	}, func() string { return fmt.Sprintf("mariadbd pid %d (0: stopped)", server.PID()) })
}
