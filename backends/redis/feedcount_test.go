package redis_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/model"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// serverCounts reads what Redis counted since its last CONFIG RESETSTAT:
// INFO commandstats by command, less the INFO and CONFIG RESETSTAT the
// test itself sends. Redis before 7.2 does not know CLIENT SETINFO (which
// go-redis sends in every handshake) and counts it only among the error
// replies, so those are added to it: a feed's other requests draw none.
func serverCounts(t *testing.T, c *goredis.Client) map[string]int {
	t.Helper()
	info, err := c.Info(t.Context(), "commandstats", "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	for _, l := range strings.Split(info, "\n") {
		l = strings.TrimSpace(l)
		if v, ok := strings.CutPrefix(l, "total_error_replies:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("INFO stats: %q", l)
			}
			m["client|setinfo"] += n
			continue
		}
		name, rest, ok := strings.Cut(strings.TrimPrefix(l, "cmdstat_"), ":calls=")
		if !ok || !strings.HasPrefix(l, "cmdstat_") {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatalf("INFO commandstats: %q", l)
		}
		m[name] += n
	}
	delete(m, "info")
	delete(m, "config|resetstat")
	if m["client|setinfo"] == 0 {
		delete(m, "client|setinfo")
	}
	return m
}

// TestFollowRequestsCounted holds the simulator's Redis feed model
// (model.FeedModels["redis"], which internal/sim costs a mirror with) to
// what the server itself counts over one Follow: its session, a snapshot
// of 100 keys, invalidations of writes made while it runs, and its beats.
// A request Follow makes that the model leaves out fails it; so does a
// control model without one of the beat's two requests.
func TestFollowRequestsCounted(t *testing.T) {
	s := redistest.MustStart(t)
	st := newRaw(t, s.Addr())
	ctl := newClient(t, s.Addr())
	const keys = 100
	for i := range keys {
		if _, err := st.CompareAndSwap(t.Context(), "feed/"+strconv.Itoa(i), driver.NoVersion, []byte("v"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	// The writer's two writes while the feed runs are counted by Redis
	// too (their scripts' commands included): the same two writes of a
	// key of their own, counted first, are taken off by name.
	wsrv := newRaw(t, s.Addr())
	write := func(key string) {
		ver, err := wsrv.CompareAndSwap(t.Context(), key, driver.NoVersion, []byte("v"), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := wsrv.CompareAndDelete(t.Context(), key, ver); err != nil {
			t.Fatal(err)
		}
	}
	write("warm/1")
	if err := ctl.ConfigResetStat(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	write("warm/2") // a fresh key, as feed/new will be
	writer := serverCounts(t, ctl)
	if err := ctl.ConfigResetStat(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}

	f := newFeed()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- st.Follow(ctx, "feed/", 50*time.Millisecond, f.fn) }()
	next := f.waitFor(t, 0, 10*time.Second, "snapshot", kindIs(driver.ChangeSynced))
	// Writes while it runs reach it as invalidations, pushed: no request.
	write("feed/new")
	next = f.waitFor(t, next, 10*time.Second, "invalidation", staleOf("feed/new"))
	for range 5 {
		next = f.waitFor(t, next, 10*time.Second, "Synced", kindIs(driver.ChangeSynced))
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow returned %v", err)
	}
	counted := serverCounts(t, ctl)
	for name, n := range writer {
		if counted[name] -= n; counted[name] == 0 {
			delete(counted, name)
		}
	}

	beats := 0
	for _, c := range f.snapshot() {
		if c.Kind == driver.ChangeSynced {
			beats++
		}
	}
	m := model.FeedModels["redis"]
	use := model.FeedUse{Sessions: 1, Pages: m.Pages(keys), Keys: keys, Beats: beats}
	if err := m.Compare(use, counted, 1); err != nil {
		t.Fatal(err)
	}
	t.Logf("server counted %v over %d beats: %d requests, the model %d", counted, beats, total(counted), m.Total(use))

	// Control: a model that leaves out the beat's PING.
	ctlModel := m
	ctlModel.Requests = nil
	for _, r := range m.Requests {
		if r.Name != "ping" {
			ctlModel.Requests = append(ctlModel.Requests, r)
		}
	}
	if err := ctlModel.Compare(use, counted, 1); err == nil {
		t.Fatal("a model without PING matched the server's count")
	}
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
