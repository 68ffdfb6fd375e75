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
		"CacheStaleness is -1ns: set a positive duration, or zero for the default " + kvbreaker.DefaultCacheStaleness.String(),
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
	if got, want := b.StateTTL(), 3*time.Hour+kvbreaker.DefaultTTLMargin; got != want {
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
	if got, want := b.StateTTL(), kvbreaker.DefaultRecoveryDelay+kvbreaker.DefaultTTLMargin; got != want {
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
