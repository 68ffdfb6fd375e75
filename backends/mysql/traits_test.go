package mysql_test

import (
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/mysql"
	"github.com/kvbreaker/kvbreaker/skew"
)

// TestDefaultTraits: a Store with default options declares DefaultTraits,
// and skew's profile of this backend declares the same, so the margin
// experiments run on what the adapter really promises.
func TestDefaultTraits(t *testing.T) {
	s := newWorkerStore(t)
	if got, want := s.Traits(), mysql.DefaultTraits(); got != want {
		t.Errorf("Traits() with default options = %+v, but DefaultTraits() = %+v", got, want)
	}
	if got, want := mysql.DefaultTraits(), skew.MySQL.Traits; got != want {
		t.Errorf("mysql.DefaultTraits() = %+v, but skew.MySQL declares %+v: update the profile", got, want)
	}
}
