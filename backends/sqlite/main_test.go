package sqlite_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kvbreaker/kvbreaker/backends/sqlite"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// workerEnv names, in a child process of this test binary, the worker it
// is to be (process_test.go): the multi-process tests re-execute the
// binary rather than use goroutines, so that the processes share nothing
// but the file.
const workerEnv = "KVBREAKER_SQLITE_WORKER"

func TestMain(m *testing.M) {
	if name := os.Getenv(workerEnv); name != "" {
		os.Exit(runWorker(name))
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines left behind: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// tempDB returns the path of a new database file in the test's temp
// directory (not created).
func tempDB(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "kvbreaker.db")
}

// open opens path, closed when t ends.
func open(t testing.TB, path string, opts ...sqlite.Option) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var prefixSeq atomic.Int64

// uniquePrefix returns a key prefix no other test uses.
func uniquePrefix(t testing.TB) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return fmt.Sprintf("test/%s/%d/", name, prefixSeq.Add(1))
}

// isolate puts a Store under a prefix of its own, forwarding List.
var isolate = backendtest.Isolate

// fakeClock is a clock the test moves; stores judge expiry by it.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
