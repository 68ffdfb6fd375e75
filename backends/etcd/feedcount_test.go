package etcd_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/mirrortest"
	"github.com/kvbreaker/kvbreaker/internal/model"
)

// grpcCounts reads what the server counted on its /metrics endpoint (the
// client URL): each unary method's calls and each stream's opening
// (grpc_server_started_total), and the messages clients sent on Watch
// streams beyond each stream's first, its create request: the
// RequestProgress requests (grpc_server_msg_received_total).
func grpcCounts(t *testing.T) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), feedWait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoints[0]+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m := map[string]int{}
	watchMsgs := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		metric, rest, ok := strings.Cut(l, "{")
		if !ok || metric != "grpc_server_started_total" && metric != "grpc_server_msg_received_total" {
			continue
		}
		labels, val, _ := strings.Cut(rest, "} ")
		_, method, _ := strings.Cut(labels, `grpc_method="`)
		method, _, _ = strings.Cut(method, `"`)
		n, err := strconv.ParseFloat(val, 64)
		if err != nil {
			t.Fatalf("metrics: %q", l)
		}
		switch {
		case metric == "grpc_server_started_total":
			m[method] += int(n)
		case method == "Watch":
			watchMsgs += int(n)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	m["RequestProgress"] = watchMsgs - m["Watch"]
	return m
}

// grpcCountsSince is what the server counted since before (grpcCounts),
// the names whose count did not change left out.
func grpcCountsSince(t *testing.T, before map[string]int) map[string]int {
	t.Helper()
	counted := map[string]int{}
	for name, n := range grpcCounts(t) {
		if d := n - before[name]; d != 0 {
			counted[name] = d
		}
	}
	return counted
}

// TestFollowRequestsCounted holds the simulator's etcd feed model
// (model.FeedModels["etcd"]) to what the server itself counts over one
// Follow (gRPC's server metrics): its session, a snapshot of 600 keys (two
// pages), the changes of writes made while it runs (pushed on the watch,
// no request) and its beats. A request Follow makes that the model leaves
// out fails it; so does a control model whose beat has no Range.
func TestFollowRequestsCounted(t *testing.T) {
	cli, st := newClientStore(t)
	prefix := uniquePrefix(t)
	const keys = 600
	for i := range keys {
		if _, err := cli.Put(t.Context(), prefix+strconv.Itoa(i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	before := grpcCounts(t)

	var synced int
	got := make(chan driver.Change, 1<<12)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- st.Follow(ctx, prefix, followHeartbeat, func(c driver.Change) { got <- c })
	}()
	wait := func(what string, ok func(driver.Change) bool) {
		t.Helper()
		for {
			select {
			case c := <-got:
				if c.Kind == driver.ChangeSynced {
					synced++
				}
				if ok(c) {
					return
				}
			case err := <-done:
				t.Fatalf("Follow returned %v", err)
			case <-time.After(feedWait):
				t.Fatalf("no %s within %v", what, feedWait)
			}
		}
	}
	isSynced := func(c driver.Change) bool { return c.Kind == driver.ChangeSynced }
	wait("snapshot", isSynced)
	// The writes are the test's own Put and Delete, counted apart.
	if _, err := cli.Put(t.Context(), prefix+"new", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(t.Context(), prefix+"new"); err != nil {
		t.Fatal(err)
	}
	wait("delete", func(c driver.Change) bool { return c.Kind == driver.ChangeDelete })
	for range 5 {
		wait("Synced", isSynced)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow returned %v", err)
	}
	counted := grpcCountsSince(t, before)
	counted["Put"]--
	counted["DeleteRange"]--
	for _, n := range []string{"Put", "DeleteRange"} {
		if counted[n] == 0 {
			delete(counted, n)
		}
	}

	// A beat's Range is sent on every tick; Synced proves the newest
	// beat the watch has reached, so several beats may give one Synced.
	// The beats are the Ranges beyond the snapshot's pages, which is what
	// the model must then account for in every other request.
	m := model.FeedModels["etcd"]
	pages := m.Pages(keys)
	beats := counted["Range"] - pages
	if beats < synced-1 {
		t.Fatalf("%d Ranges for %d pages and %d Synced after the snapshot's", counted["Range"], pages, synced-1)
	}
	use := model.FeedUse{Sessions: 1, Pages: pages, Keys: keys, Beats: beats}
	if err := m.Compare(use, counted, 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("server counted %v over %d beats (%d Synced): the model %v", counted, beats, synced, m.Count(use))

	ctlModel := m
	ctlModel.Requests = nil
	for _, r := range m.Requests {
		if r.Name == "Range" {
			r.PerBeat = 0
		}
		ctlModel.Requests = append(ctlModel.Requests, r)
	}
	if err := ctlModel.Compare(use, counted, 0); err == nil {
		t.Fatal("a model whose beat has no Range matched the server's count")
	}
}

// TestFollowDemandCounted: a feed on demand, asked for beats every 10 ms
// for a while, sends one beat (a Put of the prefix's beat key, and a
// LeaseGrant first) per heartbeat at most, and the requests etcd counts
// are what the etcd feed model says its session and those beats cost;
// then, asked nothing for five heartbeats, it sends nothing. A control
// model whose beat on demand has no Put does not match.
func TestFollowDemandCounted(t *testing.T) {
	backendtest.SessionHeld(t, 3, followDemandCounted)
}

// followDemandCounted is one run of TestFollowDemandCounted; it returns the
// Lost's error, if the feed lost its session, before it checks.
func followDemandCounted(t *testing.T) error {
	_, st := newClientStore(t)
	prefix := uniquePrefix(t)
	before := grpcCounts(t)
	puts0, grants0, _, _ := etcd.FleetBeatCounts()

	got := make(chan driver.Change, 1<<12)
	want := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- st.FollowDemand(ctx, prefix, followHeartbeat, want, func(c driver.Change) { got <- c })
	}()
	synced := 0
	ask := time.NewTicker(10 * time.Millisecond)
	deadline := time.After(feedWait)
	for synced < 6 {
		select {
		case c := <-got:
			if c.Kind == driver.ChangeLost {
				cancel()
				<-done
				return fmt.Errorf("Lost: %w", c.Err)
			}
			if c.Kind == driver.ChangeSynced {
				synced++
			}
		case <-ask.C:
			if synced > 0 {
				select {
				case want <- struct{}{}:
				default:
				}
			}
		case err := <-done:
			t.Fatalf("FollowDemand returned %v", err)
		case <-deadline:
			t.Fatalf("%d Synced within %v, want 6", synced, feedWait)
		}
	}
	ask.Stop()
	select {
	case <-want: // an ask left in the channel is not taken after this
	default:
	}
	// A beat taken before then ends within its timeout (max(heartbeat,
	// 1 s)): count it as asked.
	settle := time.NewTimer(time.Second + 2*followHeartbeat)
	<-settle.C
	puts, grants, _, _ := etcd.FleetBeatCounts()
	busy, granted := puts-puts0, grants-grants0
	// Asked nothing, for five heartbeats: no beat.
	idle := time.NewTimer(5 * followHeartbeat)
	<-idle.C
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("FollowDemand returned %v", err)
	}
	if n, _, _, _ := etcd.FleetBeatCounts(); n-puts0 != busy {
		t.Errorf("%d beats sent while nothing asked for one", n-puts0-busy)
	}
	counted := grpcCountsSince(t, before)
	m := model.FeedModels["etcd"]
	use := m.DemandStart(1)
	use.FleetBeats, use.Samples = busy, granted
	if busy < 5 {
		t.Errorf("%d beats for 5 Synced after the snapshot's", busy)
	}
	if err := m.Compare(use, counted, 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("server counted %v over %d beats on demand: the model %v", counted, busy, m.Count(use))

	ctlModel := m
	ctlModel.Requests = nil
	for _, r := range m.Requests {
		if r.Name == "Put" {
			r.PerFleetBeat = 0
		}
		ctlModel.Requests = append(ctlModel.Requests, r)
	}
	if err := ctlModel.Compare(use, counted, 0); err == nil {
		t.Fatal("a model whose beat on demand has no Put matched the server's count")
	}
	return nil
}

// TestMirrorLightTraffic: the light-traffic run (mirrortest.Light) on
// etcd, counted by the server's gRPC metrics: idle with Mirror, for 2 s,
// no request at all; under light traffic the mirror (the fleet's beats,
// a Put of the prefix's beat key by whichever process asks first) costs
// less than the requests per delivery of no mirror.
func TestMirrorLightTraffic(t *testing.T) {
	prefix := uniquePrefix(t)
	var base map[string]int
	// The feeds' beats (a Put each) in each span counted: idle, with
	// the mirror, without.
	var beats0 int
	var beats []int
	r := mirrortest.Light{
		NewStore: func(t testing.TB) driver.Store {
			st, err := etcd.New(newClient(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			p, err := kvbreaker.Prefixed(st, prefix)
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Reset: func(t testing.TB) { base = settledCounts(t.(*testing.T)); beats0, _, _, _ = etcd.FleetBeatCounts() },
		Count: func(t testing.TB) map[string]int {
			n, _, _, _ := etcd.FleetBeatCounts()
			beats = append(beats, n-beats0)
			return grpcCountsSince(t.(*testing.T), base)
		},
		Seconds: mirrortest.LightSeconds(t),
	}.Run(t)
	t.Logf("%v; beats sent idle, with the mirror: %v", r, beats[:2])
	if n := mirrortest.Total(r.IdleCount); n != 0 {
		t.Errorf("8 idle mirrors: %d requests in %v, want none: %v", n, r.Idle, r.IdleCount)
	}
	if r.Ratio() >= 1 {
		t.Errorf("the mirror costs %.3f× the requests of no mirror, want fewer", r.Ratio())
	}
}

// settledCounts returns the server's counts once two readings 300 ms
// apart agree (within 10 s): a span counted from there holds no request a
// fleet's set-up left in flight (a watch stream a client opens after its
// feed's first Synced), only what the span itself sent.
func settledCounts(t *testing.T) map[string]int {
	t.Helper()
	prev := grpcCounts(t)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(300 * time.Millisecond) // polling the server's counters
		cur := grpcCounts(t)
		if maps.Equal(prev, cur) {
			return cur
		}
		prev = cur
	}
	t.Fatalf("the server's request counts did not settle within 10 s: %v", prev)
	return nil
}
