package redis_test

import (
	"testing"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/mirrortest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// TestMirrorLightTraffic: the light-traffic run (mirrortest.Light: eight
// Breakers over one prefix, each with a client of its own as eight
// processes would have) counted by Redis's INFO commandstats. Idle with
// Mirror, for 2 s: no more than 2 commands a second in all. Under light
// traffic the mirror costs less than a quarter of the commands per delivery
// of no mirror in any run, and no more than 0.05× in a run of 60 s or more
// (KVBREAKER_LIGHT_SECONDS; in a shorter run the clock samples each
// follower takes once per 30 s weigh more).
func TestMirrorLightTraffic(t *testing.T) {
	s := redistest.MustStart(t)
	ctl := newClient(t, s.Addr())
	secs := mirrortest.LightSeconds(t)
	r := mirrortest.Light{
		NewStore: func(t testing.TB) driver.Store { return newStoreUnder(t, newClient(t, s.Addr()), "light/") },
		Reset: func(t testing.TB) {
			if err := ctl.ConfigResetStat(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
		},
		Count:   func(t testing.TB) map[string]int { return serverCounts(t.(*testing.T), ctl) },
		Seconds: secs,
	}.Run(t)
	t.Log(r)
	if r.IdlePerSecond() > 2 {
		t.Errorf("8 idle mirrors: %d commands in %v (%.1f/s), want no more than 2 a second: %v", mirrortest.Total(r.IdleCount), r.Idle, r.IdlePerSecond(), r.IdleCount)
	}
	if r.Ratio() >= 0.25 {
		t.Errorf("the mirror costs %.3f× the commands of no mirror, want well under 1", r.Ratio())
	}
	if secs >= 60 && r.Ratio() > 0.05 {
		t.Errorf("over %d s the mirror costs %.3f× the commands of no mirror, want no more than 0.05×", secs, r.Ratio())
	}
}
