// Package sim is a deterministic fleet simulator: N workers deliver messages
// to M hosts (healthy, dead, flapping, slow) in simulated time, and one
// stream of events drives every breaker model at once, so their decisions
// can be compared step by step.
//
// The reference is a Go model of fedify 2.3.x's CircuitBreaker
// (model.Fedify), not fedify itself; it drives the trace: its decision says
// whether a message is sent, held (and re-queued at its retry instant) or
// dropped. The
// other models see exactly the same calls at the same instants — every
// decision request and every outcome — and their answers are compared with
// the reference's. A delivery's outcome reaches the models after its
// latency, so other workers may decide about the same host in between.
//
// Without Races each host is served in order: while a plain send to a host
// is in flight, that host's other messages wait (decisions may still be
// made while a probe is in flight: they are half-open holds). Every outcome
// then reaches the models before the host's next decision that could send,
// which is the "realistic, sequential" stream of the design note. With
// Races any worker takes any message, and arrivals come in bursts (an
// activity fanned out to several inboxes on one host), so failures of sends
// decided while the circuit was closed arrive after it has opened.
package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/internal/model"
)

// Epoch is simulated time zero.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Options are the breaker options given to every model (zero means the
// default, the same for all: fedify's).
type Options struct {
	FailureThreshold int
	FailureWindow    time.Duration
	RecoveryDelay    time.Duration
	HoldLimit        time.Duration
	ReleaseInterval  time.Duration
	// StateTTL is fedify's explicit stateTtl and kvbreaker's StateTTL;
	// zero derives each model's own. The two-field model always derives
	// its TTL, as the note proposes. Below RecoveryDelay it is invalid:
	// fedify 2.3.3 and later refuse it (use Scenario.StoreTTL to see what a
	// store TTL below the restraint does).
	StateTTL time.Duration
	// MaxRecoveryDelay, RecoveryMultiplier and ReleaseRamp are kvbreaker's
	// recovery back-off and paced release, given to the kvbreaker models
	// only: fedify and the two-field model have neither, so with them set
	// the kvbreaker columns differ from the reference by design (later
	// probes of a host that stays down, held messages released later).
	MaxRecoveryDelay   time.Duration
	RecoveryMultiplier float64
	ReleaseRamp        time.Duration
}

// Scenario describes one simulation. Zero fields take the defaults noted.
type Scenario struct {
	Workers  int           // concurrent deliveries; default 64
	Hosts    int           // default 1000
	Duration time.Duration // simulated traffic; default 6 h
	Seed     uint64        // same seed, same report
	// Rate is the mean number of arrivals per host per hour (Poisson);
	// default 30.
	Rate float64
	// Mix weighs the host behaviours; zero means DefaultMix.
	Mix Mix
	// Zipf, if positive, makes host popularity Zipf-like: the host of rank
	// k (1-based, in a random order independent of behaviour) gets a share
	// of all arrivals proportional to 1/k^Zipf, the mean per host staying
	// Rate. Zero is uniform: every host gets Rate.
	Zipf float64
	// Processes is how many worker processes the fleet runs (each with its
	// own Breaker, and decision cache for kvbreaker+cache); every decision
	// is made in a process drawn at random, and its outcome is reported by
	// the same process. Default 8.
	Processes int
	// CacheSize and CacheStaleness are kvbreaker+cache's Settings.CacheSize
	// (per process) and CacheStaleness; defaults 4096 and 1 s.
	CacheSize      int
	CacheStaleness time.Duration
	// MirrorDelay is kvbreaker+mirror's propagation delay: another
	// process's commit, or the store's expiry of a record, reaches a
	// process's mirror this long after it happened (its own writes at
	// once). Default DefaultMirrorDelay; NoMirrorDelay (any negative
	// value) for none.
	MirrorDelay time.Duration
	// Races turns off per-host ordering and makes each arrival a burst of
	// 1..Burst messages to the host.
	Races bool
	// Burst is the largest burst with Races; default 8.
	Burst int
	// Timeout is when an unanswered delivery fails; default 10 s.
	Timeout time.Duration
	// Quiet is how long the fleet stays idle after Duration before the
	// records still live are counted; default 1 h.
	Quiet   time.Duration
	Options Options
	// StoreTTL, if set, puts every model (the reference too, which still
	// drives the trace) over a store that expires every record at most
	// StoreTTL after its write, whatever TTL the breaker asked for; their
	// names get "@ttl" and the duration ("fedify-model@ttl10m"). Below the
	// restraint (RecoveryDelay) it is the failure mode the design note
	// warns about; no setting of either breaker causes it (both refuse such
	// a TTL), the store does: an eviction policy, a TTL ceiling, an adapter
	// that expires earlier than it declares.
	StoreTTL time.Duration

	// AfterEvent, if set, is called after each decision and outcome with
	// the host it concerned, the instant, and the models (the reference
	// first).
	AfterEvent func(host string, now time.Time, models []model.Model)
	// noMirror leaves the kvbreaker+mirror column out: tests that check
	// nothing of it spare its Breakers, one per process, and the time they
	// take.
	noMirror bool

	// OnCall, if set, is called before every decision and outcome the
	// models are asked for, with the process (0 to Processes-1) that makes
	// it: the call stream, to replay through real Breakers over a real
	// store (one per process).
	OnCall func(proc int, c Call)
	// lanes is how many follower lanes run models beside the runner: 0
	// one per core beyond the first, up to one per kvbreaker variant but
	// the first; negative none (tests compare the two).
	lanes int
}

// DefaultMirrorDelay is Scenario.MirrorDelay's default: a change's
// journey from a commit to another process's mirror within one region,
// a few network round trips (a watch event, or a push naming the key).
// Measure yours and pass it.
const DefaultMirrorDelay = 5 * time.Millisecond

// NoMirrorDelay makes Scenario.MirrorDelay zero: every commit is in every
// mirror at once.
const NoMirrorDelay time.Duration = -1

// mirrorDelay is the delay the mirror model runs with.
func (s Scenario) mirrorDelay() time.Duration { return max(s.MirrorDelay, 0) }

func (s *Scenario) defaults() {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if s.Workers == 0 {
		s.Workers = 64
	}
	if s.Hosts == 0 {
		s.Hosts = 1000
	}
	def(&s.Duration, 6*time.Hour)
	if s.Rate == 0 {
		s.Rate = 30
	}
	if s.Mix.total() == 0 {
		s.Mix = DefaultMix
	}
	if s.Burst == 0 {
		s.Burst = 8
	}
	if s.Processes == 0 {
		s.Processes = 8
	}
	if s.CacheSize == 0 {
		s.CacheSize = 4096
	}
	def(&s.CacheStaleness, kvbreaker.Settings{}.WithDefaults().CacheStaleness)
	def(&s.MirrorDelay, DefaultMirrorDelay)
	def(&s.Timeout, 10*time.Second)
	def(&s.Quiet, time.Hour)
}

// Validate reports every invalid field, after defaults.
func (s Scenario) Validate() error {
	s.defaults()
	var errs []error
	bad := func(f string, a ...any) { errs = append(errs, fmt.Errorf(f, a...)) }
	if s.Workers < 0 || s.Workers > 100_000 {
		bad("workers is %d: want 1 to 100000", s.Workers)
	}
	if s.Hosts < 0 || s.Hosts > 1_000_000 {
		bad("hosts is %d: want 1 to 1000000", s.Hosts)
	}
	if s.Duration < 0 || s.Duration > 30*24*time.Hour {
		bad("duration is %v: want more than 0 and at most 720h", s.Duration)
	}
	if !(s.Rate > 0) || s.Rate > 36_000 {
		bad("rate is %v: want more than 0 and at most 36000 arrivals per host per hour", s.Rate)
	}
	for i, w := range s.Mix {
		if w < 0 {
			bad("mix weight of %s is %d: want 0 or more", Behaviour(i), w)
		}
	}
	if !(s.Zipf >= 0) || s.Zipf > 4 {
		bad("zipf exponent is %v: want 0 (uniform) to 4", s.Zipf)
	}
	if s.Processes < 0 || s.Processes > 10_000 {
		bad("processes is %d: want 1 to 10000", s.Processes)
	}
	if s.CacheSize < 0 {
		bad("cache size is %d: want 1 or more, or 0 for the default", s.CacheSize)
	}
	if s.CacheStaleness < 0 || s.CacheStaleness%time.Millisecond != 0 {
		bad("cache staleness is %v: want a positive whole number of milliseconds, or 0 for the default", s.CacheStaleness)
	}
	if s.MirrorDelay > 0 && s.MirrorDelay%time.Millisecond != 0 {
		bad("mirror delay is %v: want a whole number of milliseconds, 0 for the default, or NoMirrorDelay", s.MirrorDelay)
	}
	if s.Burst < 0 || s.Burst > 1000 {
		bad("burst is %d: want 1 to 1000", s.Burst)
	}
	if s.Timeout < time.Millisecond {
		bad("timeout is %v: want at least 1ms", s.Timeout)
	}
	if s.Quiet < 0 {
		bad("quiet is %v: want 0 or more", s.Quiet)
	}
	o := s.Options
	if o.FailureThreshold < 0 {
		bad("failure threshold is %d: want 1 or more", o.FailureThreshold)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"failure window", o.FailureWindow}, {"recovery delay", o.RecoveryDelay}, {"hold limit", o.HoldLimit}, {"release interval", o.ReleaseInterval}, {"state TTL", o.StateTTL}, {"store TTL", s.StoreTTL}, {"max recovery delay", o.MaxRecoveryDelay}, {"release ramp", o.ReleaseRamp}} {
		if d.v < 0 {
			bad("%s is %v: want a positive duration, or 0 for the default", d.name, d.v)
		}
		if d.v%time.Millisecond != 0 {
			bad("%s is %v: the simulator keeps whole milliseconds", d.name, d.v)
		}
	}
	rd := o.RecoveryDelay
	if rd == 0 {
		rd = 30 * time.Minute
	}
	if o.StateTTL > 0 && o.StateTTL < rd {
		bad("state TTL %v is below the recovery delay %v: fedify 2.3.3 and later refuse it (\"stateTtl must be at least recoveryDelay.\") and kvbreaker refuses it; a store TTL below the restraint is Scenario.StoreTTL (--store-ttl)", o.StateTTL, rd)
	}
	return errors.Join(errs...)
}

// ModelReport is one model's numbers, compared with the reference.
type ModelReport struct {
	Model string `json:"model"`
	// Refused is the model's error when it rejects the options (kvbreaker
	// refuses a StateTTL below what the store needs); the numbers are then
	// zero.
	Refused string `json:"refused,omitempty"`
	// StateTTL is the TTL the model writes records with.
	StateTTL  string `json:"state_ttl,omitempty"`
	Decisions int    `json:"decisions"`
	// Agreement is the fraction of decisions equal to the reference's.
	Agreement float64 `json:"agreement"`
	// UnsafeDivergences: the model sends or probes where the reference
	// holds or drops.
	UnsafeDivergences int `json:"unsafe_divergences"`
	// SafeDivergences: the model holds or drops where the reference sends
	// or probes.
	SafeDivergences int `json:"safe_divergences"`
	// LateProbes: the model probes where the reference holds, but only
	// because the reference probed at an earlier decision that this model
	// held and that probe is still in flight: the model's one probe, later,
	// not an extra delivery. Counted apart from unsafe divergences.
	LateProbes int `json:"late_probes"`
	// SendProbeSwaps: both deliver, but one sends and the other probes.
	SendProbeSwaps int `json:"send_probe_swaps"`
	// ExpiryEffects count what the store's expiry of this model's
	// restrained records changed, during the traffic (not the quiet
	// period): an open host asked again more than the TTL margin after its
	// restraint ended (no traffic, or held messages stuck behind busy
	// workers), or a store TTL below the restraint.
	ExpiryEffects
	// AfterRecordLoss counts the divergences at a host from such an expiry
	// (this model's or the reference's) until the host next answers (when
	// every model deletes its record and they are in step again); they are
	// not counted as unsafe, safe, late or swaps. AfterRecordLossUnsafe is
	// the part that sends or probes where the reference holds.
	AfterRecordLoss       int `json:"after_record_loss"`
	AfterRecordLossUnsafe int `json:"after_record_loss_unsafe"`
	// RetryMismatches: both hold, with different retry instants.
	RetryMismatches int `json:"retry_mismatches"`
	// TransitionMismatches: a decision or outcome after which the model
	// reported a different state change (or none) than the reference.
	TransitionMismatches int `json:"transition_mismatches"`
	Transitions          int `json:"transitions"`
	// SendsToDownHosts counts the model's sends and probes to a host that
	// was unreachable at that instant.
	SendsToDownHosts int `json:"sends_to_down_hosts"`
	Probes           int `json:"probes"`
	Drops            int `json:"drops"`
	// Store cost: the requests the model's fleet sent to its store
	// (model.Cost), and their sum per 1,000 deliveries of the trace (sends
	// and probes). EtcdLeaseGrants is what an etcd store would add
	// (kvbreaker only; not in the sum).
	StoreReads                int     `json:"store_reads"`
	StoreWrites               int     `json:"store_writes"`
	RequestsPer1000Deliveries float64 `json:"requests_per_1000_deliveries"`
	EtcdLeaseGrants           int     `json:"etcd_lease_grants,omitempty"`
	// CostOnly marks a model costed on the reference's calls without
	// deciding (gobreaker-distributed): its decision counts are zero.
	CostOnly bool `json:"cost_only,omitempty"`
	// LockRetries (gobreaker-distributed) are the Lock requests that found
	// the host's lock taken, included in StoreWrites.
	LockRetries int `json:"lock_retries,omitempty"`
	// Cache is kvbreaker+cache's decision-cache report.
	Cache *CacheReport `json:"cache,omitempty"`
	// Mirror is kvbreaker+mirror's report.
	Mirror *MirrorReport `json:"mirror,omitempty"`
	// PeakRecords is the most live records seen, sampled every simulated
	// minute; RecordsLeftAfterQuiet those still live after Quiet.
	PeakRecords           int `json:"peak_records"`
	RecordsLeftAfterQuiet int `json:"records_left_after_quiet"`

	agree int
}

// CacheReport is what the decision cache did in kvbreaker+cache's fleet.
type CacheReport struct {
	Processes int    `json:"processes"`
	Size      int    `json:"size"`
	Staleness string `json:"staleness"`
	// Served is the Allow calls answered from a process's cache, with no
	// store read.
	Served int `json:"served"`
	// StaleDecisions are those the store's record at that instant would
	// have answered differently (another process wrote since); MaxStaleAge
	// is the oldest cached record among them, below Staleness.
	StaleDecisions int     `json:"stale_decisions"`
	MaxStaleAgeMS  float64 `json:"max_stale_age_ms"`
}

// MirrorReport is what deciding from mirrors did in kvbreaker+mirror's
// fleet.
type MirrorReport struct {
	Processes int `json:"processes"`
	// Delay is the propagation delay (Scenario.MirrorDelay).
	Delay string `json:"delay"`
	// Served is the Allow calls decided from a process's mirror, with no
	// store read: every one but drops.
	Served int `json:"served"`
	// StaleDecisions are those the store's record at that instant would
	// have answered differently: another process's commit, or the store's
	// expiry, had not reached the mirror yet. StaleOutcomes are Failures
	// and Successes that wrote nothing on such a mirror where the store's
	// record would have been written. StaleRetries are holds the store's
	// record would have held too, but until another instant. MaxLagMS is
	// the longest lag among them all: how long before the call the oldest
	// change the mirror had not received happened, below Delay.
	StaleDecisions int     `json:"stale_decisions"`
	StaleRetries   int     `json:"stale_retries"`
	StaleOutcomes  int     `json:"stale_outcomes"`
	MaxLagMS       float64 `json:"max_lag_ms"`
	// FeedReads, counted in StoreReads, are the reads a feed of
	// invalidations costs (Redis, PostgreSQL: driver.ChangeStale): a
	// process reads a key the feed said changed when it is next asked
	// about it (model.Cost.FeedReads), so RequestsPer1000Deliveries is
	// those stores' figure. On etcd and the memory store the feed
	// carries the values: their figure is
	// RequestsPer1000DeliveriesNoFeedReads.
	FeedReads                            int     `json:"feed_reads"`
	RequestsPer1000DeliveriesNoFeedReads float64 `json:"requests_per_1000_deliveries_no_feed_reads"`
	// Feeds is the fleet's cost on each store that follows, every request
	// of its feeds counted.
	Feeds []FeedReport `json:"feeds"`
}

// Baseline is a fleet without a breaker: every message is sent once, when
// it arrives.
type Baseline struct {
	Model            string `json:"model"`
	SendsToDownHosts int    `json:"sends_to_down_hosts"`
}

// Trace summarises what happened to the messages (as the reference
// decided).
type Trace struct {
	Messages   int `json:"messages"`
	Deliveries int `json:"deliveries"`
	Delivered  int `json:"delivered"`
	// DeliveredAfterHold messages were held by the breaker at least once
	// and delivered once their host answered again.
	DeliveredAfterHold int `json:"delivered_after_hold"`
	Failed             int `json:"failed"`
	Holds              int `json:"holds"`
	Dropped            int `json:"dropped"`
	// Pending messages were still held or queued when traffic stopped.
	Pending int `json:"pending"`
}

// HostCounts is how many hosts have each behaviour.
type HostCounts struct {
	Healthy  int `json:"healthy"`
	Dead     int `json:"dead"`
	Flapping int `json:"flapping"`
	Slow     int `json:"slow"`
}

// Report is the result of Run.
type Report struct {
	Workers  int        `json:"workers"`
	Hosts    HostCounts `json:"hosts"`
	Duration string     `json:"duration"`
	Seed     uint64     `json:"seed"`
	Rate     float64    `json:"rate_per_host_hour"`
	// Popularity is "uniform" or "zipf:S".
	Popularity string   `json:"popularity"`
	Processes  int      `json:"processes"`
	Races      bool     `json:"races"`
	Quiet      string   `json:"quiet"`
	Trace      Trace    `json:"trace"`
	Baseline   Baseline `json:"baseline"`
	// Models lists the reference (fedify-model) first.
	Models []ModelReport `json:"models"`
}

type message struct {
	host      int
	heldSince time.Time
	proc      int // the process that decided its delivery
}

type evKind int8

const (
	evArrive evKind = iota
	evRetry
	evDone
	evSample
)

type event struct {
	at   int64 // ms since Epoch
	seq  uint64
	kind evKind
	host int
	msg  *message
	ok   bool // evDone: the delivery succeeded
	send bool // evDone: a plain send (not a probe)
}

// Run simulates s and reports every model's numbers. It returns an error
// only for an invalid scenario.
func Run(s Scenario) (*Report, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	s.defaults()
	r := &runner{
		s:   s,
		rng: rand.New(rand.NewPCG(s.Seed, 0x6b76627265616b)),
		// Latencies come from their own stream, so the workload (hosts,
		// arrivals, bursts) is the same whatever the breakers decide.
		lat:     rand.New(rand.NewPCG(s.Seed, 0x6c6174656e6379)),
		procRng: rand.New(rand.NewPCG(s.Seed, 0x70726f63657373)),
		end:     s.Duration.Milliseconds(), timeout: s.Timeout.Milliseconds(),
	}
	if err := r.setup(); err != nil {
		return nil, err
	}
	r.loop()
	return r.report(), nil
}

type runner struct {
	// calls is every call, in chunks, for the feeds' cost (feedCall).
	calls   [][]procCall
	s       Scenario
	rng     *rand.Rand // workload
	lat     *rand.Rand // delivery latencies
	procRng *rand.Rand // which process decides
	end     int64
	timeout int64
	now     int64
	seq     uint64
	events  eventHeap
	hosts   []*host
	ready   []*message
	free    int

	models    []model.Model
	ref       *model.Fedify // models[0]
	reports   []ModelReport // parallel to models, then refused ones
	refused   []ModelReport
	v         []model.Verdict
	tr        []model.Transition
	trace     Trace
	base      int
	gob       gobCost
	delivered int     // the reference's sends and probes
	replay    bool    // Replay: no cache model, no gobreaker column
	proc      int     // the process of the current call
	lanes     []*lane // lanes[0] is the runner's own, with the reference
}

// processor is a model made of processes (model.Kvbreaker).
type processor interface{ UseProcess(p int) }

func (r *runner) clock() time.Time { return Epoch.Add(time.Duration(r.now) * time.Millisecond) }

// newModels builds the models for s, the reference first, and the reports
// of those that refused the options.
func (r *runner) newModels() error {
	o := r.s.Options
	fo := model.FedifyOptions{
		FailureThreshold: o.FailureThreshold, FailureWindow: o.FailureWindow, RecoveryDelay: o.RecoveryDelay,
		HeldActivityTTL: o.HoldLimit, ReleaseInterval: o.ReleaseInterval, StateTTL: o.StateTTL,
	}
	var opts []model.Option
	if r.s.StoreTTL > 0 {
		opts = append(opts, model.WithMaxStoreTTL(r.s.StoreTTL))
	}
	fed, err := model.NewFedify(fo, opts...)
	if err != nil {
		return err
	}
	two, err := model.NewTwoField(model.TwoFieldConfig{
		FailureThreshold: o.FailureThreshold, FailureWindow: o.FailureWindow, RecoveryDelay: o.RecoveryDelay, HoldLimit: o.HoldLimit,
	}, opts...)
	if err != nil {
		return err
	}
	tc := two.Config()
	r.models = []model.Model{fed, two}
	r.ref = fed
	// The TTL each model asks for; a capped store may keep records less.
	note := ""
	if r.s.StoreTTL > 0 {
		note = fmt.Sprintf(" (store %s)", model.ShortDuration(r.s.StoreTTL))
	}
	r.reports = []ModelReport{
		{Model: fed.Name(), StateTTL: fed.Config().StateTTL.String() + note},
		{Model: two.Name(), StateTTL: tc.StateTTL().String() + note},
	}
	ks := kvbreaker.Settings{
		FailureThreshold: o.FailureThreshold, FailureWindow: o.FailureWindow, RecoveryDelay: o.RecoveryDelay,
		HoldLimit: o.HoldLimit, ReleaseInterval: o.ReleaseInterval, StateTTL: o.StateTTL,
		MaxRecoveryDelay: o.MaxRecoveryDelay, RecoveryMultiplier: o.RecoveryMultiplier, ReleaseRamp: o.ReleaseRamp,
	}
	procs := append(opts[:len(opts):len(opts)], model.WithProcesses(r.s.Processes))
	variants := []struct {
		name  string
		extra []model.Option
	}{
		{"kvbreaker", nil},
		{"kvbreaker+cache", []model.Option{model.WithDecisionCache(r.s.CacheSize, r.s.CacheStaleness)}},
		{"kvbreaker+mirror", []model.Option{model.WithMirror(r.s.mirrorDelay())}},
	}
	if r.replay {
		variants = variants[:1]
	}
	if r.s.noMirror {
		variants = variants[:len(variants)-1]
	}
	r.lanes = []*lane{{r: r, idx: []int{0, 1}}}
	for range r.followers(len(variants)) {
		r.lanes = append(r.lanes, &lane{r: r})
	}
	for vi, v := range variants {
		// The first variant stays with the runner; the others go round
		// the followers.
		l := r.lanes[0]
		if vi > 0 && len(r.lanes) > 1 {
			l = r.lanes[1+(vi-1)%(len(r.lanes)-1)]
		}
		kv, err := model.NewKvbreaker(ks, l.clock, append(procs, v.extra...)...)
		if err != nil {
			r.refused = append(r.refused, ModelReport{Model: v.name, Refused: err.Error()})
			continue
		}
		l.idx = append(l.idx, len(r.models))
		l.procs = append(l.procs, kv)
		r.models = append(r.models, kv)
		rep := ModelReport{Model: kv.Name(), StateTTL: kv.Breaker().StateTTL().String() + note}
		switch v.name {
		case "kvbreaker+cache":
			rep.Cache = &CacheReport{Processes: r.s.Processes, Size: r.s.CacheSize, Staleness: r.s.CacheStaleness.String()}
		case "kvbreaker+mirror":
			rep.Mirror = &MirrorReport{Processes: r.s.Processes, Delay: r.s.mirrorDelay().String()}
		}
		r.reports = append(r.reports, rep)
	}
	r.v = make([]model.Verdict, len(r.models))
	r.tr = make([]model.Transition, len(r.models))
	return nil
}

func (r *runner) newHost(name string) *host {
	n := len(r.models)
	return &host{name: name, owed: make([]bool, n), lost: make([]bool, n), exp: make([]expiry, n), mean: float64(hour) / r.s.Rate}
}

func (r *runner) setup() error {
	if err := r.newModels(); err != nil {
		return err
	}

	counts := r.s.Mix.counts(r.s.Hosts)
	var kinds []Behaviour
	for b, n := range counts {
		for range n {
			kinds = append(kinds, Behaviour(b))
		}
	}
	r.rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	// Popularity: the mean time between arrivals at the host of index k.
	// Ranked by index, and behaviours were shuffled above, so popularity
	// is independent of behaviour.
	means := make([]float64, len(kinds))
	total := 0.0
	for k := range means {
		means[k] = float64(hour) / r.s.Rate
		total += math.Pow(float64(k+1), -r.s.Zipf)
	}
	if r.s.Zipf > 0 {
		for k := range means {
			means[k] = float64(hour) / (r.s.Rate * float64(len(kinds)) * math.Pow(float64(k+1), -r.s.Zipf) / total)
		}
	}
	for i, b := range kinds {
		h := r.newHost(fmt.Sprintf("host%05d.example", i))
		h.behaviour = b
		h.mean = means[i]
		if b == Flapping {
			h.toggles, h.startDown = flapTimeline(r.rng, r.end)
		}
		r.hosts = append(r.hosts, h)
		r.schedule(event{at: r.nextArrival(h, 0), kind: evArrive, host: i})
	}
	for t := int64(0); t < r.end; t += minute {
		r.schedule(event{at: t, kind: evSample})
	}
	r.free = r.s.Workers
	return nil
}

func (r *runner) nextArrival(h *host, from int64) int64 {
	return from + 1 + int64(r.rng.ExpFloat64()*h.mean)
}

func (r *runner) schedule(e event) {
	if e.at >= r.end {
		return
	}
	r.seq++
	e.seq = r.seq
	r.events.push(e)
}

func (r *runner) loop() {
	for _, l := range r.lanes[1:] {
		if len(l.idx) > 0 {
			l.start()
		}
	}
	for r.events.len() > 0 {
		e := r.events.pop()
		r.now = e.at
		switch e.kind {
		case evArrive:
			n := 1
			if r.s.Races {
				n = 1 + r.rng.IntN(r.s.Burst)
			}
			h := r.hosts[e.host]
			for range n {
				r.trace.Messages++
				if h.down(r.now) {
					r.base++
				}
				r.ready = append(r.ready, &message{host: e.host})
			}
			r.schedule(event{at: r.nextArrival(h, r.now), kind: evArrive, host: e.host})
		case evRetry:
			r.ready = append(r.ready, e.msg)
		case evDone:
			r.outcome(e)
		case evSample:
			r.sample(callSample)
		}
		r.dispatch()
	}
	r.trace.Pending = len(r.ready)
	for _, h := range r.hosts {
		r.trace.Pending += len(h.blocked)
	}
	// The fleet goes quiet: nothing is delivered any more, time passes,
	// and what is left in each store is counted.
	r.now = r.end + r.s.Quiet.Milliseconds()
	r.sample(callQuiet)
	for _, l := range r.lanes {
		l.wait()
	}
}

// sample counts the live records of every model, for the peak (callSample,
// during the traffic) or after the quiet time (callQuiet).
func (r *runner) sample(k callKind) {
	now := r.clock()
	c := call{kind: k, now: r.now, proc: r.proc}
	n := 0
	for _, h := range r.hosts {
		// A restrained record that expired with no call at its host
		// since is a silent close too; found here, once a minute. An
		// expiry at the reference puts every model's divergences at h
		// apart.
		if k == callSample && h.exp[0].check(r.ref, h.name, now, &r.reports[0].ExpiryEffects) {
			c.lostHosts = append(c.lostHosts, h)
		}
		if r.ref.Live(h.name, now) {
			n++
		}
	}
	if k == callSample {
		r.reports[0].PeakRecords = max(r.reports[0].PeakRecords, n)
	} else {
		r.reports[0].RecordsLeftAfterQuiet = n
	}
	r.send(c)
}

// send passes c to every lane.
func (r *runner) send(c call) {
	for _, l := range r.lanes {
		if len(l.idx) > 0 {
			l.send(c)
		}
	}
}

// checkExpiry counts model i's (not the reference's) restrained record at
// h if the store has expired it, which puts model i's divergences at h
// apart.
func (r *runner) checkExpiry(h *host, i int, now time.Time) {
	if h.exp[i].check(r.models[i], h.name, now, &r.reports[i].ExpiryEffects) {
		h.lost[i] = true
	}
}

func (r *runner) dispatch() {
	for r.free > 0 && len(r.ready) > 0 {
		m := r.ready[0]
		r.ready[0] = nil
		r.ready = r.ready[1:]
		h := r.hosts[m.host]
		if !r.s.Races && h.sending {
			h.blocked = append(h.blocked, m)
			continue
		}
		r.decide(m, h)
	}
}

func delivers(d kvbreaker.Decision) bool { return d == kvbreaker.Send || d == kvbreaker.Probe }

func (r *runner) decide(m *message, h *host) {
	m.proc = r.procRng.IntN(r.s.Processes)
	r.useProcess(m.proc)
	ref := r.judge(h, m.heldSince, h.down(r.now))
	r.schedule1(m, h, ref)
	r.after(h)
}

func (r *runner) useProcess(p int) { r.proc = p }

// judge asks every model about a delivery to h of a message held since
// heldSince (zero: fresh) and compares their answers with the reference's,
// which it returns; down says whether the host is unreachable now.
func (r *runner) judge(h *host, heldSince time.Time, down bool) model.Verdict {
	now := r.clock()
	if r.s.OnCall != nil {
		c := Call{At: now.Sub(Epoch), Host: h.name, Kind: CallAllow}
		if !heldSince.IsZero() {
			c.HeldSince = heldSince.Sub(Epoch)
		}
		r.s.OnCall(r.proc, c)
	}
	r.feedCall()
	c := call{kind: callAllow, down: down, proc: r.proc, now: r.now, h: h, heldSince: heldSince}
	c.refLost = h.exp[0].check(r.ref, h.name, now, &r.reports[0].ExpiryEffects)
	c.ref, c.refTr = r.ref.Allow(h.name, now, heldSince)
	ref := c.ref
	if delivers(ref.Decision) {
		r.delivered++
	}
	if ref.Decision != kvbreaker.Drop {
		// A message past its hold limit is dropped without asking.
		r.gob.execute(h, r.now)
	}
	r.send(c)
	return ref
}

// schedule1 acts on the reference's verdict for m: a delivery, a retry, or
// a drop.
func (r *runner) schedule1(m *message, h *host, ref model.Verdict) {
	now := r.clock()
	switch ref.Decision {
	case kvbreaker.Send, kvbreaker.Probe:
		r.free--
		r.trace.Deliveries++
		lat, ok := h.deliver(r.now, r.lat, r.timeout)
		// gobreaker's Execute holds the host's lock while the request runs.
		h.lockUntil = max(h.lockUntil, r.now+lat)
		send := ref.Decision == kvbreaker.Send
		if send && !r.s.Races {
			h.sending = true
		}
		// An outcome that would land after the traffic stops is lost;
		// the worker is freed when the run ends anyway.
		r.schedule(event{at: r.now + lat, kind: evDone, host: m.host, msg: m, ok: ok, send: send})
	case kvbreaker.Hold:
		r.trace.Holds++
		if m.heldSince.IsZero() {
			m.heldSince = now
		}
		r.schedule(event{at: ref.RetryAt.Sub(Epoch).Milliseconds(), kind: evRetry, host: m.host, msg: m})
	case kvbreaker.Drop:
		r.trace.Dropped++
	}
}

func (r *runner) outcome(e event) {
	r.free++
	h := r.hosts[e.host]
	if e.ok {
		r.trace.Delivered++
		if !e.msg.heldSince.IsZero() {
			r.trace.DeliveredAfterHold++
		}
	} else {
		r.trace.Failed++
	}
	r.useProcess(e.msg.proc)
	r.tell(h, e.ok)
	if e.send && !r.s.Races {
		h.sending = false
		r.ready = append(r.ready, h.blocked...)
		h.blocked = nil
	}
	r.after(h)
}

// tell tells every model that a delivery to h succeeded or failed.
func (r *runner) tell(h *host, ok bool) {
	now := r.clock()
	if r.s.OnCall != nil {
		k := CallFailure
		if ok {
			k = CallSuccess
		}
		r.s.OnCall(r.proc, Call{At: now.Sub(Epoch), Host: h.name, Kind: k})
	}
	r.feedCall()
	c := call{kind: callOutcome, ok: ok, proc: r.proc, now: r.now, h: h}
	c.refLost = h.exp[0].check(r.ref, h.name, now, &r.reports[0].ExpiryEffects)
	if ok {
		c.refTr = r.ref.Success(h.name, now)
	} else {
		c.refTr = r.ref.Failure(h.name, now)
	}
	r.send(c)
}

func (r *runner) after(h *host) {
	if r.s.AfterEvent != nil {
		r.s.AfterEvent(h.name, r.clock(), r.models)
	}
}

func (r *runner) report() *Report {
	s := r.s
	c := s.Mix.counts(s.Hosts)
	rep := &Report{
		Workers: s.Workers, Duration: s.Duration.String(), Seed: s.Seed, Rate: s.Rate, Races: s.Races, Quiet: s.Quiet.String(),
		Popularity: s.popularity(), Processes: s.Processes,
		Hosts:    HostCounts{Healthy: c[Healthy], Dead: c[Dead], Flapping: c[Flapping], Slow: c[Slow]},
		Trace:    r.trace,
		Baseline: Baseline{Model: "no-breaker", SendsToDownHosts: r.base},
	}
	for i, m := range r.reports {
		if m.Decisions > 0 {
			m.Agreement = float64(m.agree) / float64(m.Decisions)
		}
		r.fillCost(&m, r.models[i])
		rep.Models = append(rep.Models, m)
	}
	if !r.replay {
		rep.Models = append(rep.Models, r.gob.report(r.delivered))
	}
	rep.Models = append(rep.Models, r.refused...)
	feedRatios(rep)
	return rep
}

// eventHeap is a binary min-heap ordered by (at, seq): events at the same
// instant run in the order they were scheduled.
type eventHeap struct{ a []event }

func (h *eventHeap) len() int { return len(h.a) }

func (h *eventHeap) less(i, j int) bool {
	if h.a[i].at != h.a[j].at {
		return h.a[i].at < h.a[j].at
	}
	return h.a[i].seq < h.a[j].seq
}

func (h *eventHeap) push(e event) {
	h.a = append(h.a, e)
	for i := len(h.a) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.a[i], h.a[p] = h.a[p], h.a[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	top := h.a[0]
	n := len(h.a) - 1
	h.a[0] = h.a[n]
	h.a = h.a[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && h.less(l, m) {
			m = l
		}
		if l+1 < n && h.less(l+1, m) {
			m = l + 1
		}
		if m == i {
			break
		}
		h.a[i], h.a[m] = h.a[m], h.a[i]
		i = m
	}
	return top
}
