package memory

import (
	"testing"

	"github.com/kvbreaker/kvbreaker/internal/leakcheck"
)

// TestMain fails the binary if a test leaves a goroutine behind (a sweep
// that outlives its store's Close).
func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }
