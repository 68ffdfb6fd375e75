package adapter_test

import (
	"testing"

	"github.com/kvbreaker/kvbreaker/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }
