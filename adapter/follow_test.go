package adapter_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestListArgsRefusesNonPositive: every limit below 1 is refused with an
// error that names it and says what to pass; every positive one passes
// (the control: a check that refused everything would fail here).
func TestListArgsRefusesNonPositive(t *testing.T) {
	for _, limit := range []int{0, -1, -1 << 62} {
		err := adapter.ListArgs(limit)
		if err == nil {
			t.Errorf("ListArgs(%d) = nil, want an error", limit)
			continue
		}
		if !strings.Contains(err.Error(), "limit "+strconv.Itoa(limit)+" ") || !strings.Contains(err.Error(), "pass ") {
			t.Errorf("ListArgs(%d) = %q: want the limit named and what to pass", limit, err)
		}
	}
	for _, limit := range []int{1, 2, 1 << 62} {
		if err := adapter.ListArgs(limit); err != nil {
			t.Errorf("ListArgs(%d) = %v, want nil", limit, err)
		}
	}
}

// TestFeedSynced: Synced delivers the change and becomes Last; Due wants a
// beat only once the newest Synced is a heartbeat old and no beat sent
// within the heartbeat still waits (each condition alone holds it back).
func TestFeedSynced(t *testing.T) {
	var got []driver.Change
	f := adapter.Feed{Heartbeat: time.Second, Fn: func(c driver.Change) { got = append(got, c) }}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if !f.Last().IsZero() {
		t.Fatalf("Last() = %v before any Synced, want zero", f.Last())
	}
	f.Synced(t0)
	if len(got) != 1 || got[0].Kind != driver.ChangeSynced || !got[0].At.Equal(t0) || !f.Last().Equal(t0) {
		t.Fatalf("after Synced(t0): delivered %+v, Last %v; want one Synced at t0, Last t0", got, f.Last())
	}
	for _, c := range []struct {
		name    string
		now     time.Time
		newest  time.Time
		waiting bool
		want    bool
	}{
		{"Synced fresh", t0.Add(999 * time.Millisecond), time.Time{}, false, false},
		{"Synced a heartbeat old", t0.Add(time.Second), time.Time{}, false, true},
		{"a beat within the heartbeat waits", t0.Add(2 * time.Second), t0.Add(1500 * time.Millisecond), true, false},
		{"the waiting beat is a heartbeat old", t0.Add(2 * time.Second), t0.Add(time.Second), true, true},
		{"an old beat recorded but none waits", t0.Add(2 * time.Second), t0.Add(1500 * time.Millisecond), false, true},
	} {
		if d := f.Due(c.now, c.newest, c.waiting); d != c.want {
			t.Errorf("%s: Due = %v, want %v", c.name, d, c.want)
		}
	}
}

// TestFeedCallTimeout: four heartbeats, never below 5 s.
func TestFeedCallTimeout(t *testing.T) {
	for hb, want := range map[time.Duration]time.Duration{
		time.Millisecond: 5 * time.Second, time.Second: 5 * time.Second, 2 * time.Second: 8 * time.Second,
	} {
		if got := (&adapter.Feed{Heartbeat: hb}).CallTimeout(); got != want {
			t.Errorf("heartbeat %v: CallTimeout() = %v, want %v", hb, got, want)
		}
	}
}
