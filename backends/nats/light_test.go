package nats_test

import (
	"encoding/json"
	"net/http"
	"testing"

	kvnats "github.com/kvbreaker/kvbreaker/backends/nats"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/mirrortest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/natstest"
)

// serverCounts reads the server's own counts of what its clients sent:
// every message in (/varz in_msgs: a request is one, a key's put is one),
// and of them the JetStream API requests (/jsz api.total).
func serverCounts(t testing.TB, s *natstest.Server) (in, api int) {
	t.Helper()
	get := func(path string, v any) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.MonitorURL()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	var varz struct {
		InMsgs int `json:"in_msgs"`
	}
	var jsz struct {
		API struct {
			Total int `json:"total"`
		} `json:"api"`
	}
	get("/varz", &varz)
	get("/jsz", &jsz)
	return varz.InMsgs, jsz.API.Total
}

// TestMirrorLightTraffic: the light-traffic run (mirrortest.Light) on
// NATS, on a server of the test's own, counted by the server (every
// message its clients sent): idle with Mirror, for 2 s, no more than 2 a
// second in all; under light traffic, the fleet beating once on demand
// (a put of the reserved beat subject, a stream info per wipe check and per
// clock sample), the mirror costs under 0.2× no mirror per delivery (0.04×
// measured; a beat per deciding process, a consumer info and a stream
// info, came to 0.41× and fails it).
func TestMirrorLightTraffic(t *testing.T) {
	s := natstest.MustStartWith(t, natstest.Options{Monitor: true})
	var in0, api0 int
	r := mirrortest.Light{
		NewStore: func(t testing.TB) driver.Store {
			st, err := kvnats.New(t.Context(), connect(t, s.URL()), "light")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
		Reset: func(t testing.TB) { in0, api0 = serverCounts(t, s) },
		Count: func(t testing.TB) map[string]int {
			in, api := serverCounts(t, s)
			return map[string]int{"JetStream API": api - api0, "other messages in": (in - in0) - (api - api0)}
		},
		Seconds: mirrortest.LightSeconds(t),
	}.Run(t)
	t.Log(r)
	if r.IdlePerSecond() > 2 {
		t.Errorf("8 idle mirrors: %d messages in %v (%.1f/s), want no more than 2 a second: %v", mirrortest.Total(r.IdleCount), r.Idle, r.IdlePerSecond(), r.IdleCount)
	}
	if r.Ratio() >= 0.2 {
		t.Errorf("the mirror costs %.3f× the messages of no mirror per delivery, want under 0.2", r.Ratio())
	}
}
