package machine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

func TestNewConfigDefaults(t *testing.T) {
	c, err := NewConfig(Config{}, driver.Traits{Atomic: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.FailureThreshold != 5 || c.FailureWindow != 10*time.Minute || c.RecoveryDelay != 30*time.Minute ||
		c.HoldLimit != 7*24*time.Hour || c.ReleaseInterval != time.Second {
		t.Fatalf("defaults: %+v", c)
	}
	if want := 30*time.Minute + 5*time.Second; c.StateTTL != want {
		t.Fatalf("StateTTL = %v, want %v", c.StateTTL, want)
	}
	// The window dominates when it is longer than the recovery delay.
	c, _ = NewConfig(Config{FailureWindow: time.Hour}, driver.Traits{})
	if want := time.Hour + 5*time.Second; c.StateTTL != want {
		t.Fatalf("StateTTL = %v, want %v", c.StateTTL, want)
	}
	// A store needing more than the default margin gets it.
	coarse := driver.Traits{Expiry: driver.ExpiryModel{Kind: driver.ExpiryRelative, Granularity: 10 * time.Second}}
	c, _ = NewConfig(Config{ClockSkew: 2 * time.Second}, coarse)
	if want := 30*time.Minute + 14*time.Second; c.StateTTL != want {
		t.Fatalf("StateTTL = %v, want %v", c.StateTTL, want)
	}
}

func TestNewConfigRejects(t *testing.T) {
	etcdLike := driver.Traits{Atomic: true, Expiry: driver.ExpiryModel{Kind: driver.ExpiryRelative, Granularity: time.Second}}
	cases := []struct {
		name   string
		s      Config
		traits driver.Traits
		want   []string // every fragment must appear
	}{
		{name: "negative-durations", s: Config{FailureWindow: -1, RecoveryDelay: -time.Second, HoldLimit: -1, ReleaseInterval: -1, ClockSkew: -1},
			want: []string{"FailureWindow is -1ns", "RecoveryDelay is -1s", "HoldLimit", "ReleaseInterval", "ClockSkew", "set a positive duration"}},
		{name: "threshold-below-one", s: Config{FailureThreshold: -3}, want: []string{"FailureThreshold is -3: set at least 1"}},
		{name: "state-ttl-below-recovery", s: Config{StateTTL: 10 * time.Minute}, want: []string{"StateTTL is 10m0s, below 30m2.001s", "raise StateTTL"}},
		{name: "state-ttl-without-margin", s: Config{StateTTL: 30 * time.Minute}, traits: etcdLike, want: []string{"StateTTL is 30m0s, below 30m3s"}},
		{name: "margin-below-store-need", s: Config{TTLMargin: time.Second}, traits: etcdLike, want: []string{"TTLMargin is 1s but this store (relative expiry, granularity 1s", "needs at least 3s"}},
		{name: "custom-policy-without-ttl", s: Config{FailurePolicy: func([]time.Time) bool { return true }}, want: []string{"FailurePolicy is set but StateTTL is not"}},
		// A record holding more failures than the codec's limit does not
		// decode, reads as absent, and the circuit never opens.
		{name: "threshold-above-codec", s: Config{FailureThreshold: record.MaxFailures + 1}, want: []string{"FailureThreshold is 4097, above the 4096 failures a record can hold"}},
		{name: "history-above-codec", s: Config{HistoryLimit: record.MaxFailures + 1, FailurePolicy: func([]time.Time) bool { return false }, StateTTL: time.Hour},
			want: []string{"HistoryLimit is 4097, above the 4096"}},
		// A store whose physical expiry covers 1 s of skew would delete a
		// record a 5 s-fast reader still needs.
		{name: "skew-beyond-store-padding", s: Config{ClockSkew: 5 * time.Second},
			traits: driver.Traits{Atomic: true, Expiry: driver.ExpiryModel{Kind: driver.ExpiryReaderFiltered, Granularity: time.Second}, MaxClockSkew: time.Second, MaxClockSkewOption: "dynamodb.WithPurgeDelay"},
			want:   []string{"ClockSkew is 5s but this store's physical expiry covers at most 1s", "raise it with dynamodb.WithPurgeDelay"}},
		{name: "all-at-once", s: Config{FailureThreshold: -1, HoldLimit: -1, TTLMargin: -1}, want: []string{"FailureThreshold", "HoldLimit", "TTLMargin"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewConfig(tc.s, tc.traits)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not say %q", err, w)
				}
			}
		})
	}
}

func TestNewConfigAcceptsExplicit(t *testing.T) {
	c, err := NewConfig(Config{StateTTL: 2 * time.Hour, FailurePolicy: func(f []time.Time) bool { return len(f) > 50 }}, driver.Traits{})
	if err != nil {
		t.Fatal(err)
	}
	if c.StateTTL != 2*time.Hour || c.HistoryLimit != DefaultHistoryLimit {
		t.Fatalf("%+v", c)
	}
	// The largest accepted values of the codec-bounded settings.
	if _, err := NewConfig(Config{FailureThreshold: record.MaxFailures}, driver.Traits{}); err != nil {
		t.Fatalf("threshold at the codec bound rejected: %v", err)
	}
	covered := driver.Traits{Expiry: driver.ExpiryModel{Kind: driver.ExpiryReaderFiltered}, MaxClockSkew: 2 * time.Second}
	if _, err := NewConfig(Config{ClockSkew: 2 * time.Second}, covered); err != nil {
		t.Fatalf("skew the store covers rejected: %v", err)
	}
	if _, err := NewConfig(Config{TTLMargin: 3 * time.Second, StateTTL: 30*time.Minute + 3*time.Second}, driver.Traits{Expiry: driver.ExpiryModel{Granularity: time.Second}}); err != nil {
		t.Fatalf("exact requirement rejected: %v", err)
	}
}

// TestNewConfigNormalised: what NewConfig returns has every field set,
// TTLMargin the margin StateTTL was derived with, and is accepted again
// unchanged, so a normalised Config can be passed on without re-deriving.
func TestNewConfigNormalised(t *testing.T) {
	coarse := driver.Traits{Expiry: driver.ExpiryModel{Kind: driver.ExpiryRelative, Granularity: 10 * time.Second}}
	for _, tc := range []struct {
		name   string
		in     Config
		traits driver.Traits
		margin time.Duration
	}{
		{"defaults", Config{}, driver.Traits{Atomic: true}, DefaultTTLMargin},
		{"store needs more", Config{ClockSkew: 2 * time.Second}, coarse, 14 * time.Second},
		{"explicit margin", Config{TTLMargin: time.Minute, FailureThreshold: 3}, driver.Traits{}, time.Minute},
		{"explicit ttl", Config{StateTTL: 2 * time.Hour}, driver.Traits{}, DefaultTTLMargin},
	} {
		c, err := NewConfig(tc.in, tc.traits)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.TTLMargin != tc.margin {
			t.Errorf("%s: TTLMargin = %v, want %v", tc.name, c.TTLMargin, tc.margin)
		}
		if c.FailureThreshold == 0 || c.FailureWindow == 0 || c.RecoveryDelay == 0 || c.HoldLimit == 0 ||
			c.ReleaseInterval == 0 || c.ClockSkew == 0 || c.StateTTL == 0 || c.HistoryLimit == 0 {
			t.Errorf("%s: a field left unset: %+v", tc.name, c)
		}
		// No case sets a FailurePolicy, so the rest compares as a string.
		again, err := NewConfig(c, tc.traits)
		if err != nil || fmt.Sprintf("%+v", again) != fmt.Sprintf("%+v", c) {
			t.Errorf("%s: NewConfig(%+v) = %+v, %v; want it unchanged", tc.name, c, again, err)
		}
	}
}
