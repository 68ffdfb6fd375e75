package nats_test

import (
	"errors"
	"slices"
	"testing"

	kvnats "github.com/kvbreaker/kvbreaker/backends/nats"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestInvalidArgumentsAllReported: New and Dial report every invalid
// argument and option at once, each a *driver.OptionError naming nats and
// the option, before they contact a server (none is running here). The
// negative control is a valid set of options, which gets past the checks
// to the missing connection alone.
func TestInvalidArgumentsAllReported(t *testing.T) {
	bad := []kvnats.Option{kvnats.WithReplicas(0), kvnats.WithTombstoneTTL(0)}
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"New", func() error { _, err := kvnats.New(t.Context(), nil, "no spaces", bad...); return err }(),
			[]string{"connection", "bucket", "WithReplicas", "WithTombstoneTTL"}},
		{"Dial", func() error { _, err := kvnats.Dial(t.Context(), " ", "no spaces", nil, bad...); return err }(),
			[]string{"server URL", "bucket", "WithReplicas", "WithTombstoneTTL"}},
		{"New, valid options", func() error { _, err := kvnats.New(t.Context(), nil, "kvbreaker", kvnats.WithReplicas(3)); return err }(),
			[]string{"connection"}},
	} {
		var got []string
		var each []error
		if j, ok := tc.err.(interface{ Unwrap() []error }); ok {
			each = j.Unwrap()
		} else {
			each = []error{tc.err}
		}
		for _, e := range each {
			oe, ok := errors.AsType[*driver.OptionError](e)
			if !ok || oe.Backend != "nats" {
				t.Errorf("%s: %v is not a nats *driver.OptionError", tc.name, e)
				continue
			}
			got = append(got, oe.Option)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: options %q, want %q (%v)", tc.name, got, tc.want, tc.err)
		}
	}
}
