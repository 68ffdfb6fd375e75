package kvbreaker_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/internal/machine"
)

// defaults are the values New uses for zero Settings fields.
var defaults = kvbreaker.Settings{}.WithDefaults()

// TestSettingsWithDefaults: WithDefaults fills the documented defaults,
// keeps what is set, fills again nothing, and gives New settings it
// takes as it takes the zero ones (same StateTTL). Setting
// ClockCheckInterval beside SkipClockCheck is the negative control: New
// refuses it, so WithDefaults must leave it zero there.
func TestSettingsWithDefaults(t *testing.T) {
	want := kvbreaker.Settings{FailureThreshold: 5, FailureWindow: 10 * time.Minute, RecoveryDelay: 30 * time.Minute,
		HoldLimit: 7 * 24 * time.Hour, ReleaseInterval: time.Second, ClockSkew: time.Second, CallTimeout: 5 * time.Second,
		CacheStaleness: time.Second, MirrorSize: 100_000, MirrorStaleness: time.Second, ClockCheckInterval: 10 * time.Minute}
	if !reflect.DeepEqual(defaults, want) {
		t.Errorf("Settings{}.WithDefaults() = %+v\nwant the documented %+v", defaults, want)
	}
	if again := defaults.WithDefaults(); !reflect.DeepEqual(again, defaults) {
		t.Errorf("WithDefaults twice = %+v, want %+v", again, defaults)
	}
	set := kvbreaker.Settings{FailureThreshold: 2, RecoveryDelay: time.Minute, CallTimeout: time.Second, MirrorSize: 7}
	if got := set.WithDefaults(); got.FailureThreshold != 2 || got.RecoveryDelay != time.Minute || got.CallTimeout != time.Second || got.MirrorSize != 7 {
		t.Errorf("WithDefaults changed set fields: %+v", got)
	}
	policy := func([]time.Time) bool { return false }
	for _, c := range []struct {
		name string
		s    kvbreaker.Settings
	}{
		{"zero", kvbreaker.Settings{}},
		{"skip-clock-check", kvbreaker.Settings{SkipClockCheck: true}},
		{"back-off", kvbreaker.Settings{MaxRecoveryDelay: 4 * time.Hour}},
		{"policy", kvbreaker.Settings{FailurePolicy: policy, StateTTL: time.Hour}},
		{"mirror", kvbreaker.Settings{Mirror: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			plain, err := kvbreaker.New(memory.New(), c.s)
			if err != nil {
				t.Fatal(err)
			}
			defer plain.Close(t.Context())
			filled, err := kvbreaker.New(memory.New(), c.s.WithDefaults())
			if err != nil {
				t.Fatalf("New refused %+v: %v", c.s.WithDefaults(), err)
			}
			defer filled.Close(t.Context())
			if plain.StateTTL() != filled.StateTTL() {
				t.Errorf("StateTTL %v with WithDefaults, %v without", filled.StateTTL(), plain.StateTTL())
			}
		})
	}
	if got := (kvbreaker.Settings{FailurePolicy: policy}).WithDefaults().HistoryLimit; got != 100 {
		t.Errorf("HistoryLimit with a FailurePolicy = %d, want 100", got)
	}
	if got := (kvbreaker.Settings{MaxRecoveryDelay: time.Hour}).WithDefaults().RecoveryMultiplier; got != 2 {
		t.Errorf("RecoveryMultiplier with MaxRecoveryDelay = %v, want 2", got)
	}
	bad := kvbreaker.Settings{SkipClockCheck: true, ClockCheckInterval: defaults.ClockCheckInterval}
	if _, err := kvbreaker.New(memory.New(), bad); err == nil {
		t.Error("negative control: New took ClockCheckInterval beside SkipClockCheck")
	}
}

// TestSettingsEveryProblemAtOnce: New refuses a bad value of each of the
// machine's fields and of the Breaker's own, naming every one in one
// error; so each field reaches the validation, and none is dropped on the
// way to the machine.
func TestSettingsEveryProblemAtOnce(t *testing.T) {
	s := kvbreaker.Settings{
		FailureThreshold: -1,
		FailureWindow:    -1,
		RecoveryDelay:    -1,
		HoldLimit:        -1,
		ReleaseInterval:  -1,
		ClockSkew:        -1,
		TTLMargin:        -1,
		StateTTL:         -1,
		HistoryLimit:     -1,
		MaxRecoveryDelay: -1,
		ReleaseRamp:      -1,
		CallTimeout:      -1,
		CacheStaleness:   -1,
		CacheSize:        -1,
	}
	_, err := kvbreaker.New(memory.New(), s)
	if err == nil {
		t.Fatal("New accepted negative settings")
	}
	for _, want := range []string{
		"kvbreaker: invalid settings",
		"FailureThreshold is -1", "FailureWindow is -1ns", "RecoveryDelay is -1ns", "HoldLimit is -1ns",
		"ReleaseInterval is -1ns", "ClockSkew is -1ns", "TTLMargin is -1ns", "StateTTL is -1ns", "HistoryLimit is -1",
		"CallTimeout is -1ns", "CacheSize is -1", "MaxRecoveryDelay is -1ns", "ReleaseRamp is -1ns",
		"CacheStaleness is -1ns: set a positive duration, or zero for the default " + defaults.CacheStaleness.String(),
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\ndoes not say %q", err, want)
		}
	}
	// FailurePolicy cannot be negative: set without StateTTL it is refused.
	_, err = kvbreaker.New(memory.New(), kvbreaker.Settings{FailurePolicy: func([]time.Time) bool { return false }})
	if err == nil || !strings.Contains(err.Error(), "FailurePolicy is set but StateTTL is not") {
		t.Errorf("New with a FailurePolicy and no StateTTL: %v", err)
	}
}

// TestSettingsReachTheMachine: positive values arrive as given; StateTTL is
// derived from the ones that set it.
func TestSettingsReachTheMachine(t *testing.T) {
	b, err := kvbreaker.New(memory.New(), kvbreaker.Settings{RecoveryDelay: time.Hour, FailureWindow: 2 * time.Hour, TTLMargin: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.StateTTL(), 2*time.Hour+time.Minute; got != want {
		t.Errorf("StateTTL() = %v, want max(RecoveryDelay, FailureWindow) + TTLMargin = %v", got, want)
	}
	b, err = kvbreaker.New(memory.New(), kvbreaker.Settings{RecoveryDelay: time.Minute, MaxRecoveryDelay: 3 * time.Hour, RecoveryMultiplier: 3, ReleaseRamp: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.StateTTL(), 3*time.Hour+machine.DefaultTTLMargin; got != want {
		t.Errorf("StateTTL() = %v, want MaxRecoveryDelay + TTLMargin = %v", got, want)
	}
	_, err = kvbreaker.New(memory.New(), kvbreaker.Settings{RecoveryMultiplier: 3})
	if err == nil || !strings.Contains(err.Error(), "RecoveryMultiplier is 3 but MaxRecoveryDelay is zero") {
		t.Errorf("RecoveryMultiplier without MaxRecoveryDelay: %v", err)
	}
	b, err = kvbreaker.New(memory.New(), kvbreaker.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.StateTTL(), defaults.RecoveryDelay+machine.DefaultTTLMargin; got != want {
		t.Errorf("default StateTTL() = %v, want %v", got, want)
	}
}

// TestSettingsNamesMachineFields: the machine's Config has the field names
// and types of Settings, since its validation messages name Settings'
// fields; a field added to one and not the other fails here.
func TestSettingsNamesMachineFields(t *testing.T) {
	st := reflect.TypeFor[kvbreaker.Settings]()
	ct := reflect.TypeFor[machine.Config]()
	exported := 0
	for i := range ct.NumField() {
		cf := ct.Field(i)
		if !cf.IsExported() {
			continue
		}
		exported++
		sf, ok := st.FieldByName(cf.Name)
		if !ok || sf.Type != cf.Type {
			t.Errorf("machine.Config.%s (%v) has no kvbreaker.Settings field of that name and type", cf.Name, cf.Type)
		}
	}
	if exported != 13 {
		t.Errorf("machine.Config has %d exported fields, want the thirteen of Settings the machine uses", exported)
	}
}
