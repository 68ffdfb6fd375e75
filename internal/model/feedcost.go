package model

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// FeedModel is what one process's feed (driver.Follower.Follow, as each
// adapter implements it) sends its store, request by request, named as the
// store's own statistics name them (Redis's INFO commandstats, etcd's gRPC
// methods, PostgreSQL's statements, NATS JetStream API subjects), so that
// a count the server keeps can be compared with it name by name.
//
// A feed's requests come in four kinds: those that open a session (the
// connections' handshakes, the subscription, the consumer), those of its
// snapshot (per page and per key), those of its heartbeat (one beat proves
// the feed current and yields a Synced), and, on a feed of invalidations,
// the reads a mirror makes of a key the feed said changed (counted by the
// mirror as Cost.FeedReads, not here: they are the mirror's requests).
// The changes themselves are pushed on the open connection and cost no
// request.
type FeedModel struct {
	Store string
	// Requests lists each request the feed sends and when.
	Requests []FeedRequest
	// SnapshotPage is how many keys one page of the snapshot reads (0:
	// the snapshot is one request whatever its size).
	SnapshotPage int
	// Invalidations is set for a feed that delivers driver.ChangeStale
	// (the key, not its value): a mirror reads such a key once when next
	// asked about it (Cost.FeedReads).
	Invalidations bool
	// BeatsPer is how many beats the feed sends per heartbeat interval
	// (Redis pings every half heartbeat, SQLite polls every
	// DefaultFollowPoll or heartbeat, whichever is shorter); nil means one.
	BeatsPer func(heartbeat time.Duration) float64
	// Demand is set for a feed that beats on demand
	// (driver.DemandFollower), which a mirror follows with FollowDemand:
	// after each session's own first beat, a beat is sent through the
	// store by whichever follower needs one, and serves every follower
	// (FeedUse.FleetBeats); nil: every process beats on its own.
	Demand *DemandBeats
}

// DemandBeats is how a feed that beats on demand spends its requests
// besides the beats themselves.
type DemandBeats struct {
	// CheckEvery: a beat's sender also checks the store was not wiped
	// when the newest beat that did is this many heartbeats old
	// (FeedUse.Checks).
	CheckEvery float64
	// CheckEachBeat: a beat's sender checks the store before every beat
	// (NATS: a wipe reaches no consumer, so a beat proves the feed
	// current only up to a check it carries).
	CheckEachBeat bool
	// SampleEvery: each follower reads the store's clock when its last
	// sample is this old and a beat is to be sent or converted
	// (FeedUse.Samples).
	SampleEvery time.Duration
	// MarkerRefresh: a follower whose own marker no beat of its own has
	// checked for this long checks it on its own (a Check).
	MarkerRefresh time.Duration
	// Jitter: a follower asked for a beat lets its newest Synced age up to
	// heartbeat/Jitter more, at random, drawn anew with each Synced (0:
	// none); DemandFleet spreads the processes' extra evenly over that
	// span, and turns the spread by one process with each beat sent, so
	// that the processes take turns as the first to ask.
	Jitter int
	// FirstBeat: a session's first Synced costs a beat of its own (Redis:
	// a PING); false: its snapshot's Synced needs none.
	FirstBeat bool
	// SenderSamples: a beat's sender dates it with its own sample of the
	// store's clock (Redis); false: the server dates it as it runs
	// (PostgreSQL's clock_timestamp()), and only a receiver converts.
	SenderSamples bool
	// OwnBeatSamples: a beat's return to its sender is a sample of the
	// store's clock (PostgreSQL: the beat carries the server's clock as
	// its statement ran, read after the sender sent it and before it
	// came back), so a follower samples only when it sent no beat for
	// SampleEvery.
	OwnBeatSamples bool
	// CheckSamples: a wipe check is also a sample of the store's clock
	// for its sender (NATS: a stream info carries the server's time).
	CheckSamples bool
	// SenderOnlySamples: only a beat's sender takes a sample, when it
	// sends (SenderSamples) and its last is SampleEvery old; receivers
	// take none. etcd's "sample" reads no clock: it is the grant of the
	// lease its sender puts the beat key with, and a receiver dates
	// another's beat from the elapsed time the beat carries.
	SenderOnlySamples bool
	// PerProcess: a beat serves its sender alone: each process beats for
	// itself, only when asked (etcd's fallback for a client refused the
	// beat's put; no store's model).
	PerProcess bool
}

// DemandStart is what procs feeds on demand cost before their first beat
// on demand: a session each, whose snapshot found the store empty, and
// its first beat when that costs one (DemandBeats.FirstBeat).
func (m FeedModel) DemandStart(procs int) FeedUse {
	u := FeedUse{Sessions: procs, DemandSessions: procs, Pages: procs * m.Pages(0)}
	if m.Demand != nil && m.Demand.FirstBeat {
		u.Beats = procs
	}
	return u
}

// FeedRequest is one kind of request of a feed, and how many of it each
// part of the feed sends.
type FeedRequest struct {
	Name string
	// PerSession: sent once each time the feed (re)starts; PerDemandSession
	// more when it beats on demand.
	PerSession, PerDemandSession int
	// PerPage, PerKey: sent for each page of a snapshot, and each key in it.
	PerPage, PerKey int
	// PerBeat: sent for each heartbeat beat of one process's own.
	PerBeat int
	// PerFleetBeat, PerCheck, PerSample: sent for each beat on demand,
	// each wipe check riding on one, each sample of the store's clock
	// (DemandBeats).
	PerFleetBeat, PerCheck, PerSample int
	// UpTo: the counts above are a bound, which the feed reaches only
	// when it must (etcd asks for progress only while its watch trails
	// the revision a beat read); the simulator costs the bound.
	UpTo bool
}

// FeedUse is what a feed did: the sessions it opened (the first and each
// resynchronisation), the keys its snapshots read in all, the pages they
// took, and its beats.
type FeedUse struct {
	Sessions, Pages, Keys, Beats int
	// DemandSessions: of Sessions, those that beat on demand.
	DemandSessions int
	// FleetBeats, Checks and Samples are a feed's on demand (DemandBeats).
	FleetBeats, Checks, Samples int
}

// Count returns the requests u costs, by name.
func (m FeedModel) Count(u FeedUse) map[string]int {
	out := map[string]int{}
	for _, r := range m.Requests {
		if n := r.PerSession*u.Sessions + r.PerDemandSession*u.DemandSessions + r.PerPage*u.Pages + r.PerKey*u.Keys + r.PerBeat*u.Beats +
			r.PerFleetBeat*u.FleetBeats + r.PerCheck*u.Checks + r.PerSample*u.Samples; n > 0 {
			out[r.Name] += n
		}
	}
	return out
}

// Total is the sum of Count.
func (m FeedModel) Total(u FeedUse) int {
	n := 0
	for _, v := range m.Count(u) {
		n += v
	}
	return n
}

// PerBeat is the requests one beat costs.
func (m FeedModel) PerBeat() int {
	n := 0
	for _, r := range m.Requests {
		n += r.PerBeat
	}
	return n
}

// Pages is how many snapshot pages reading keys takes: at least one (an
// empty prefix is still asked).
func (m FeedModel) Pages(keys int) int {
	if m.SnapshotPage == 0 {
		return 1
	}
	return max(1, (keys+m.SnapshotPage-1)/m.SnapshotPage)
}

// Beats is how many beats a feed with heartbeat sends in d.
func (m FeedModel) Beats(heartbeat, d time.Duration) int {
	per := 1.0
	if m.BeatsPer != nil {
		per = m.BeatsPer(heartbeat)
	}
	return int(float64(d) / float64(heartbeat) * per)
}

// Run is the use of one process's feed that ran for d with heartbeat and
// one session whose snapshot read keys.
func (m FeedModel) Run(heartbeat, d time.Duration, keys int) FeedUse {
	return FeedUse{Sessions: 1, Pages: m.Pages(keys), Keys: keys, Beats: m.Beats(heartbeat, d)}
}

// Compare checks counted, what a server counted over a feed's requests (by
// name, nothing else), against what m says u costs; slack allows up to that
// many more of a per-beat request (a beat in flight when the feed ended),
// and a request marked UpTo may be counted fewer times.
// It names every request the server counted that m does not know, and
// every count that differs.
func (m FeedModel) Compare(u FeedUse, counted map[string]int, slack int) error {
	want := m.Count(u)
	perBeat, upTo := map[string]bool{}, map[string]bool{}
	for _, r := range m.Requests {
		perBeat[r.Name] = r.PerBeat > 0 || r.PerFleetBeat > 0
		upTo[r.Name] = r.UpTo
	}
	var bad []string
	names := map[string]bool{}
	for n := range want {
		names[n] = true
	}
	for n := range counted {
		names[n] = true
	}
	for n := range names {
		got, w := counted[n], want[n]
		if got == w || perBeat[n] && got > w && got <= w+slack || upTo[n] && got <= w {
			continue
		}
		bad = append(bad, fmt.Sprintf("%s: server counted %d, the %s feed model %d", n, got, m.Store, w))
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return fmt.Errorf("feed requests the model does not account for (%+v): %v", u, bad)
}

// sqliteFollowPoll is the SQLite adapter's default poll interval
// (sqlite.DefaultFollowPoll; the root module cannot import it).
const sqliteFollowPoll = 50 * time.Millisecond

// FeedModels are the feeds of the adapters that follow, as their Follow
// is written (backends/*/follow.go):
//
//   - memory: in process; nothing is sent.
//   - etcd: a session opens one Watch stream; the snapshot is a Range per
//     page of 512 keys. Under Follow a beat, every heartbeat, is a
//     count-only linearizable Range and, when the watch has not yet
//     reached that revision, a RequestProgress on the open stream
//     (counted here on every beat: an upper bound; the server counts any
//     message on the stream after its first, so the watch's cancel as a
//     session ends is counted under that name too). On demand, the
//     snapshot's Synced costs no beat; a beat is a Put of the prefix's
//     reserved key, which every follower of the prefix receives and dates
//     from the elapsed times it carries, without a request; its sender
//     grants the key's lease (LeaseGrant) when its own is 5 min old.
//   - Redis: a session opens two connections (HELLO, CLIENT SETNAME, two
//     CLIENT SETINFO and CLIENT ID each: go-redis's handshake), turns
//     CLIENT TRACKING on on one as it connects and SUBSCRIBEs it; the
//     snapshot is a SCAN per page (COUNT 256: a page is a hint to Redis,
//     which may answer in more) and an HMGET per key; a beat of its own
//     (every half heartbeat under Follow, the session's first only under
//     FollowDemand) is a PING on the subscriber and a GETEX of the
//     session's marker key on the other connection (set when the session
//     starts, deleted when it ends: a FLUSHALL or SWAPDB behind the feed's
//     back removes it). On demand, a beat is a PUBLISH, after a GETEX of
//     the sender's marker (a swap reaches no subscriber, so a beat proves
//     only what a check before it does; and each follower's own marker
//     when it went 30 min unchecked), and
//     each follower reads TIME at most every 30 s to date beats.
//   - PostgreSQL: a session checks the triggers, names its connection,
//     LISTENs (two statements, the table's channel and the follower's own,
//     sent as one query) and reads the snapshot in one query; under Follow
//     a beat, every heartbeat, is a pg_notify from the pool. On demand, a
//     session's first Synced is its snapshot's; a beat is a pg_notify on
//     the table's channel dated by the server's clock_timestamp(), which
//     needs no sample by its sender; each receiver reads the server's
//     clock (SELECT clock_timestamp()) to convert others' beats when its
//     last reading is 30 s old, and its own beat's return is a reading.
//   - NATS: a session creates a push consumer (and on a replicated bucket
//     asks who leads the stream) and deletes it when it ends; the
//     snapshot is pushed by it; the wipe check is a stream info, made
//     once per session (when the stream lost messages, a filtered stream
//     info more, only then). Under Follow a beat, every heartbeat, is a
//     consumer info and a stream info. On demand a session first puts a
//     message on the beat's subject and reads the stream's state again
//     (beat.go's seed). On demand (a bucket of one
//     server; a replicated one beats as under Follow, for itself: not
//     modelled), a beat is a put of a reserved subject of the bucket
//     (PUB beat) which every follower of the prefix receives, dated by
//     the server's time of a check its sender makes first (a stream info,
//     also a sample of the server's clock), before every beat, since a
//     wipe reaches no consumer; each receiver samples
//     the server's clock (a stream info, its ts) to convert others'
//     beats when its last sample is 30 s old, and its own beat's return
//     is a sample.
//   - SQLite: no server; a beat is a poll, two statements when nothing
//     changed, every 50 ms (or heartbeat if shorter).
var FeedModels = map[string]FeedModel{
	"memory": {Store: "memory"},
	"etcd": {Store: "etcd", SnapshotPage: 512,
		Demand: &DemandBeats{SampleEvery: 5 * time.Minute, Jitter: 8, SenderSamples: true, SenderOnlySamples: true},
		Requests: []FeedRequest{
			{Name: "Watch", PerSession: 1},
			{Name: "Range", PerPage: 1, PerBeat: 1},
			{Name: "RequestProgress", PerSession: 1, PerBeat: 1, UpTo: true},
			{Name: "Put", PerFleetBeat: 1},
			{Name: "LeaseGrant", PerSample: 1},
		}},
	"redis": {Store: "redis", SnapshotPage: 256, Invalidations: true,
		BeatsPer: func(time.Duration) float64 { return 2 },
		Demand: &DemandBeats{CheckEachBeat: true, SampleEvery: 30 * time.Second, MarkerRefresh: 30 * time.Minute, Jitter: 8,
			FirstBeat: true, SenderSamples: true},
		Requests: []FeedRequest{
			{Name: "hello", PerSession: 2},
			{Name: "client|setname", PerSession: 2},
			{Name: "client|setinfo", PerSession: 4},
			{Name: "client|id", PerSession: 2},
			{Name: "subscribe", PerSession: 1},
			{Name: "client|tracking", PerSession: 1},
			{Name: "scan", PerPage: 1},
			{Name: "hmget", PerKey: 1},
			{Name: "set", PerSession: 1},
			{Name: "del", PerSession: 1},
			{Name: "ping", PerBeat: 1},
			{Name: "getex", PerBeat: 1, PerCheck: 1},
			{Name: "publish", PerFleetBeat: 1},
			{Name: "time", PerSample: 1},
		}},
	"postgres": {Store: "postgres", Invalidations: true,
		Demand: &DemandBeats{SampleEvery: 30 * time.Second, Jitter: 8, OwnBeatSamples: true},
		Requests: []FeedRequest{
			{Name: "trigger check", PerSession: 1},
			{Name: "set_config", PerSession: 1},
			{Name: "LISTEN", PerSession: 2},
			{Name: "snapshot", PerPage: 1},
			{Name: "pg_notify", PerBeat: 1},
			{Name: "pg_notify dated", PerFleetBeat: 1},
			{Name: "clock_timestamp", PerSample: 1},
		}},
	"nats": {Store: "nats",
		Demand: &DemandBeats{CheckEachBeat: true, SampleEvery: 30 * time.Second, Jitter: 8, OwnBeatSamples: true, CheckSamples: true},
		Requests: []FeedRequest{
			{Name: "CONSUMER.CREATE", PerSession: 1},
			{Name: "CONSUMER.DELETE", PerSession: 1},
			{Name: "CONSUMER.INFO", PerBeat: 1},
			{Name: "STREAM.INFO", PerSession: 1, PerDemandSession: 1, PerBeat: 1, PerCheck: 1, PerSample: 1},
			{Name: "PUB beat", PerDemandSession: 1, PerFleetBeat: 1},
		}},
	"sqlite": {Store: "sqlite", SnapshotPage: 0,
		BeatsPer: func(hb time.Duration) float64 {
			return float64(hb) / float64(min(sqliteFollowPoll, hb))
		},
		Requests: []FeedRequest{
			{Name: "snapshot", PerPage: 2},
			{Name: "poll", PerBeat: 2},
		}},
}

// FeedStores lists FeedModels' stores in a fixed order.
var FeedStores = []string{"memory", "etcd", "redis", "postgres", "nats", "sqlite"}

// DemandFleet counts what the feeds of a fleet of mirrors send when they
// beat on demand (FeedModel.Demand), from every call of every process in
// time order, as mirror.go and a DemandFollower behave: a call whose
// process's newest Synced is a heartbeat old asks for a beat, which its
// feed sends unless one of its own is under way; the beat reaches every
// process delay later and is each one's new Synced; a follower reads the
// store's clock when a beat is to be sent or converted (others' beats) and
// its last sample is SampleEvery old; a sender checks for a wipe when the
// newest check is CheckEvery heartbeats old.
type DemandFleet struct {
	d         DemandBeats
	hb, delay time.Duration
	// start is the fleet's time zero: the instants below are durations
	// since it, whose arithmetic is an integer's (time.Time's is several
	// times slower, and a run costs millions of calls).
	start    time.Time
	extra    []time.Duration // each process's jitter
	last     []time.Duration // each process's newest Synced
	sampled  []time.Duration // each process's last clock sample (never: none)
	inflight []bool
	pending  []demandBeat
	checked  time.Duration   // the newest wipe check (never: none)
	ownCheck []time.Duration // each process's last check of its own marker
	// Use is what the fleet's feeds sent so far: a session each, its
	// first beat (a PING of its own), and the beats on demand.
	Use FeedUse
}

// never marks an instant that has not happened: before any call's.
const never = time.Duration(math.MinInt64)

type demandBeat struct {
	at, arrives time.Duration
	proc        int
}

// NewDemandFleet starts procs processes' feeds at start, each with a
// session whose snapshot found the store empty, and its first Synced.
func NewDemandFleet(m FeedModel, procs int, heartbeat, delay time.Duration, start time.Time) *DemandFleet {
	f := &DemandFleet{d: *m.Demand, hb: heartbeat, delay: delay, start: start, checked: never,
		last: make([]time.Duration, procs), sampled: make([]time.Duration, procs), inflight: make([]bool, procs)}
	f.extra = make([]time.Duration, procs)
	f.ownCheck = make([]time.Duration, procs)
	for p := range procs {
		f.sampled[p] = never
		if m.Demand.Jitter > 0 {
			f.extra[p] = heartbeat / time.Duration(m.Demand.Jitter) * time.Duration(p) / time.Duration(procs)
		}
	}
	f.Use = m.DemandStart(procs)
	return f
}

// sample counts proc's clock sample at t if its last is too old.
func (f *DemandFleet) sample(proc int, t time.Duration) {
	if f.sampled[proc] == never || t-f.sampled[proc] >= f.d.SampleEvery {
		f.sampled[proc] = t
		f.Use.Samples++
	}
}

// Commit is a commit at t (in time order with the calls) on a store
// whose every change carried the server's clock: it would reach every
// process delay later and date its feed as a beat does, each follower
// converting it with its clock sample. No store does this today; it
// costs what such a feed would save (see internal/sim's what-ifs). A
// feed that beats for its own process alone (PerProcess) ignores it.
func (f *DemandFleet) Commit(t time.Time) { f.CommitAfter(t.Sub(f.start)) }

// CommitAfter is Commit at d after the fleet's start.
func (f *DemandFleet) CommitAfter(d time.Duration) {
	if f.d.PerProcess {
		return
	}
	f.pending = append(f.pending, demandBeat{at: d, arrives: d + f.delay, proc: -1})
}

// Call is a call of proc at t (the calls in time order).
func (f *DemandFleet) Call(proc int, t time.Time) { f.CallAfter(proc, t.Sub(f.start)) }

// CallAfter is Call at t after the fleet's start.
func (f *DemandFleet) CallAfter(proc int, t time.Duration) {
	if f.d.MarkerRefresh != 0 {
		for q, c := range f.ownCheck {
			// A follower whose own marker went unchecked for half its
			// hour checks it on its own (Checks).
			for t-c > f.d.MarkerRefresh {
				c += f.d.MarkerRefresh
				f.Use.Checks++
			}
			f.ownCheck[q] = c
		}
	}
	n := 0
	for _, b := range f.pending {
		if b.arrives > t {
			f.pending[n] = b
			n++
			continue
		}
		for q := range f.last {
			if f.d.PerProcess && q != b.proc {
				continue
			}
			if q == b.proc {
				f.inflight[q] = false
				if f.d.OwnBeatSamples && b.at > f.sampled[q] {
					f.sampled[q] = b.at
				}
			} else if !f.d.SenderOnlySamples {
				f.sample(q, b.arrives)
			}
			if b.at > f.last[q] {
				f.last[q] = b.at
			}
		}
	}
	f.pending = f.pending[:n]
	if t-f.last[proc] < f.hb+f.extra[(proc+f.Use.FleetBeats)%len(f.extra)] || f.inflight[proc] {
		return
	}
	if f.d.SenderSamples {
		f.sample(proc, t)
	}
	if f.d.CheckEachBeat || f.d.CheckEvery > 0 && (f.checked == never || float64(t-f.checked) >= f.d.CheckEvery*float64(f.hb)) {
		f.checked = t
		f.ownCheck[proc] = t
		f.Use.Checks++
		if f.d.CheckSamples {
			f.sampled[proc] = t
		}
	}
	f.Use.FleetBeats++
	f.inflight[proc] = true
	f.pending = append(f.pending, demandBeat{at: t, arrives: t + f.delay, proc: proc})
}
