// Package simulate is the simulate command without a command framework:
// its flags on a pflag.FlagSet, their checks, the run and its report. The
// full command (cobra, in the cmd/kvbreaker module) and the demo build
// (internal/demo, make demo) both use it. It lives in the root module so
// that the demo builds outside the workspace (GOWORK=off): its first build
// then loads only the root module's requirements, compiles neither cobra
// nor any backend SDK, and prints the same report.
package simulate

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/internal/sim"

	"github.com/kvbreaker/kvbreaker/internal/output"
)

// Long is the command's description, before Footer in its help.
const Long = `Simulates a fleet of workers delivering messages to many remote hosts —
healthy, dead, flapping and slow — in simulated time (hours of traffic in
seconds, the same seed giving the same numbers), and runs these circuit
breakers on the very same stream of decisions and outcomes:

  fedify-model  a Go model of fedify 2.3.x's CircuitBreaker (state, failures,
                 opened, halfOpened), not fedify itself: the reference; its
                 decisions drive the trace
  two-field    the design note's (failures, restrainedUntil) record, exactly
                 as its pseudocode reads
  kvbreaker      this project: (failures, restrainedUntil, probing), core.Breaker
                 over the in-memory store, one Breaker per process (--processes)
  kvbreaker+cache  the same with each process's decision cache on
                 (Settings.CacheSize --cache-size, CacheStaleness --cache-staleness)
  kvbreaker+mirror  the same with each process deciding from a mirror of the store
                 (Settings.Mirror over a store that pushes its changes): Allow, and a
                 Success on a host the mirror knows absent, send no request; writes
                 still compare-and-swap against the store; a process's own writes are
                 in its mirror at once, other processes' commits and the store's
                 expiries after --mirror-delay; its requests are a Redis or
                 PostgreSQL feed's (a changed key read when next asked about),
                 "w/o feed reads" an etcd or memory feed's (values pushed)

and, for store cost only, gobreaker's distributed breaker (sony/gobreaker/v2
DistributedCircuitBreaker, one per host), costed on the reference's calls:
every decision is one Execute (GetData, Lock, SetData, Unlock; a Lock that
finds the host's lock held retries every 500 ms, each retry a request).

and a fleet with no breaker at all, which sends every message once. The table
shows how many deliveries each sent to hosts that were down, how often each
agrees with the reference, and how many records each leaves behind.

The fedify model is checked call for call against fedify 2.3.8's own breaker
on random call streams (opt-in, needs node and npm, from a clone):
  KVBREAKER_FEDIFY=1 go test -run TestAgainstFedify -v ./internal/model/

Store cost: every model counts the requests its fleet sends to the store
(reads; writes: puts, deletes, compare-and-swaps, locks), and their sum per
1,000 deliveries (sends and probes of the trace). The fedify model counts
what fedify 2.3.8's code does: one get per beforeSend (none for a drop), one
more write to take a probe; recordSuccess one get, one delete if a record
exists; recordFailure one get, one write unless open, and the outbox's
beforeSend after every failure, one get more. kvbreaker+cache's stale
decisions are answers the store's record at that instant would have given
otherwise, each on a cached record younger than --cache-staleness.
kvbreaker+mirror counts the same (stale decisions, and holds with another retry
instant), and outcomes that wrote nothing on a mirror the store's record would
have had written, each with the lag of the oldest change its mirror had not yet
received (below --mirror-delay). Its feed costs no request where it carries
the values (etcd, the memory store); where it names the changed keys (Redis,
PostgreSQL, as driver.ChangeStale) a process reads such a key when it is next
asked about it, once per run of changes (its own writes' included): those
reads are in its store reads ("reads after a Stale"), and the row "without
feed reads" gives the figure for etcd and the memory store.

With --store-ttl D every breaker, the reference too, runs over a store that
expires each record at most D after its write, whatever TTL it asked for
(names get "@ttlD"). Below the recovery delay this is a store TTL below the
restraint, the failure mode the design note warns about: fedify 2.3.3+ and
kvbreaker refuse such a --state-ttl, so only the store can cause it.
`

// Example is the command's examples.
const Example = `  kvbreaker simulate
  kvbreaker simulate --races                    # adversarial races
  kvbreaker simulate --store-ttl 10m            # every store expires records after 10m,
                                                # inside the 30m restraint
  kvbreaker simulate --workers 64 --hosts 1000 --duration 24h --format json
  kvbreaker simulate --popularity zipf          # a few hot hosts, a long tail
  kvbreaker simulate --mirror-delay 50ms        # mirrors 50ms behind the store`

// Footer explains the report's rows.
const Footer = `Reading the numbers (JSON field names in brackets):
  sends to down hosts [sends_to_down_hosts]  deliveries (sends and probes) to a host
      that was unreachable at that instant; the no-breaker baseline sends every message once
  agreement [agreement]  fraction of decisions equal to fedify-model's
  unsafe [unsafe_divergences]  sends or probes where the reference holds
  safe [safe_divergences]  holds where the reference sends or probes
  late probes [late_probes]  the reference's probe, taken a moment later (not an extra one)
  silent closes [silent_closes]  restrained (open or half-open) records the store expired
      during the traffic: each closed a circuit with no state change reported
    sends instead of probe [sends_instead_of_probe]  the first decision after the lost
      record's restraint end: a plain send where the record would have probed
    sends instead of hold [sends_instead_of_hold]  decisions before it ended: sends the
      record would have held (only a store TTL below the restraint does this)
    late failures counted as closed [late_failures_counted_closed]  failures reported
      after the expiry, before the host answered or reopened: counted toward the
      threshold where the record ignores them (open) or reopens (half-open)
    reopens after expiry [reopens_after_expiry]  closed->open from those failures
    divergences from fedify-model after an expiry are counted apart [after_record_loss]
  peak records, records left after quiet [peak_records, records_left_after_quiet]
      live records in the store at most, and after the fleet went idle for --quiet
Without --races each host has at most one plain send in flight, so every outcome
reaches the breakers before the host's next send: the design note's sequential streams.
`

// Flags are the command's flags; Register puts them on a flag set, and
// Run checks them.
type Flags struct {
	// Terminal, if set, is how the caller recognises a terminal, where
	// the progress line goes; nil: a character device.
	Terminal func(io.Writer) bool

	s      sim.Scenario
	mix    string
	pop    string
	format string
}

// Register defines f's flags on fs, with their defaults.
func (f *Flags) Register(fs *pflag.FlagSet) {
	s := &f.s
	fs.IntVar(&s.Workers, "workers", 64, "concurrent deliveries across the fleet")
	fs.IntVar(&s.Hosts, "hosts", 1000, "remote hosts")
	fs.DurationVar(&s.Duration, "duration", 6*time.Hour, "simulated `time` of traffic")
	fs.Uint64Var(&s.Seed, "seed", 1, "random seed; the same seed gives the same report")
	fs.Float64Var(&s.Rate, "rate", 30, "mean arrivals per host per hour")
	fs.StringVar(&f.mix, "mix", sim.DefaultMix.String(), "relative weight of each host behaviour")
	fs.BoolVar(&s.Races, "races", false, "inject races: no per-host ordering, and each arrival is a burst of 1..burst messages,\nso failures of sends decided while closed arrive after the circuit opened")
	fs.IntVar(&s.Burst, "burst", 8, "largest burst of messages per arrival with --races")
	fs.DurationVar(&s.Timeout, "timeout", 10*time.Second, "a delivery unanswered this long fails")
	fs.DurationVar(&s.Quiet, "quiet", time.Hour, "idle `time` after the traffic before counting the records left")
	def := kvbreaker.Settings{}.WithDefaults()
	fs.IntVar(&s.Options.FailureThreshold, "failure-threshold", def.FailureThreshold, "failures within the failure window that open a circuit")
	fs.DurationVar(&s.Options.FailureWindow, "failure-window", def.FailureWindow, "failures older than this stop counting")
	fs.DurationVar(&s.Options.RecoveryDelay, "recovery-delay", def.RecoveryDelay, "an open circuit holds for this long, then lets one probe through")
	fs.DurationVar(&s.Options.MaxRecoveryDelay, "max-recovery-delay", 0, "kvbreaker columns only: recovery back-off, each failed probe multiplies the restraint\nby --recovery-multiplier up to this `long` (0: a fixed recovery-delay)")
	fs.Float64Var(&s.Options.RecoveryMultiplier, "recovery-multiplier", 0, "kvbreaker columns only: recovery back-off's factor, above 1 (0: 2 with --max-recovery-delay)")
	fs.DurationVar(&s.Options.ReleaseRamp, "release-ramp", 0, "kvbreaker columns only: the paced release, held messages return over twice the outage,\nat most this `long` (0: all at once)")
	fs.DurationVar(&s.Options.HoldLimit, "hold-limit", def.HoldLimit, "a message held this long is dropped")
	fs.DurationVar(&s.Options.ReleaseInterval, "release-interval", def.ReleaseInterval, "while a probe is in flight, held messages re-check this often")
	fs.DurationVar(&s.Options.StateTTL, "state-ttl", 0, "fedify's stateTtl and kvbreaker's StateTTL (0: each derives its own); fedify 2.3.3+\nrefuses one below recovery-delay, kvbreaker one below max(recovery-delay, failure-window) + margin")
	fs.DurationVar(&s.StoreTTL, "store-ttl", 0, "every breaker's store expires each record at most this `long` after its write,\nwhatever TTL the breaker asked for (0: stores keep records as long as asked)")
	fs.StringVar(&f.pop, "popularity", "uniform", "host popularity: uniform (every host gets --rate), zipf or zipf:S (the host of\nrank k gets a share of all arrivals proportional to 1/k^S, S=1 for zipf; the mean stays --rate)")
	fs.IntVar(&s.Processes, "processes", 8, "worker processes (one Breaker and decision cache each); decisions go to a random one")
	fs.IntVar(&s.CacheSize, "cache-size", 4096, "kvbreaker+cache's Settings.CacheSize, per process")
	fs.DurationVar(&s.CacheStaleness, "cache-staleness", def.CacheStaleness, "kvbreaker+cache's Settings.CacheStaleness")
	fs.DurationVar(&s.MirrorDelay, "mirror-delay", sim.DefaultMirrorDelay, "kvbreaker+mirror's propagation delay: another process's commit, or the store's expiry\n"+
		"of a record, reaches a mirror this `long` after it (0: at once). The default is an assumption\n"+
		"(a few round trips in one region): pass the p99 lag measured on your store")
	fs.StringVar(&f.format, "format", "table", "output format: table or json")
}

func (f *Flags) validate() error {
	s := &f.s
	if err := checkFormat(f.format); err != nil {
		return err
	}
	m, err := sim.ParseMix(f.mix)
	if err != nil {
		return usagef("--mix: %v", err)
	}
	s.Mix = m
	if s.Zipf, err = sim.ParsePopularity(f.pop); err != nil {
		return usagef("--popularity: %v", err)
	}
	// Zero would silently mean "default" below the command: reject it here,
	// where the user typed it.
	for _, z := range []struct {
		name string
		zero bool
	}{
		{"workers", s.Workers == 0}, {"hosts", s.Hosts == 0}, {"duration", s.Duration == 0}, {"burst", s.Burst == 0},
		{"failure-threshold", s.Options.FailureThreshold == 0}, {"failure-window", s.Options.FailureWindow == 0},
		{"recovery-delay", s.Options.RecoveryDelay == 0}, {"hold-limit", s.Options.HoldLimit == 0},
		{"release-interval", s.Options.ReleaseInterval == 0}, {"timeout", s.Timeout == 0},
		{"processes", s.Processes == 0}, {"cache-size", s.CacheSize == 0}, {"cache-staleness", s.CacheStaleness == 0},
	} {
		if z.zero {
			return usagef("--%s must be positive", z.name)
		}
	}
	switch {
	case s.MirrorDelay < 0:
		return usagef("--mirror-delay must be 0 or more")
	case s.MirrorDelay == 0:
		s.MirrorDelay = sim.NoMirrorDelay
	}
	if err := s.Validate(); err != nil {
		return usagef("%s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return nil
}

// Run checks f (a *UsageError for a bad value) and runs the simulation,
// writing its report to stdout and, on a terminal, its progress to stderr.
func Run(f *Flags, stdout, stderr io.Writer) error {
	if err := f.validate(); err != nil {
		return err
	}
	start := time.Now()
	tty := f.Terminal
	if tty == nil {
		tty = progressTTY
	}
	stop := simProgress(&f.s, stderr, tty)
	rep, err := sim.Run(f.s)
	stop()
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	if f.format == "json" {
		out, err := simulateJSON(rep, f.s, elapsed)
		if err != nil {
			return err
		}
		return output.JSON(stdout, out)
	}
	writeTable(stdout, rep, elapsed)
	return nil
}

// Progress: runs longer than progressAfter show how much simulated time
// has passed, every progressTick, on a terminal only (a log or a pipe gets
// nothing). Variables for tests.
var (
	progressAfter = 2 * time.Second
	progressTick  = time.Second
	progressTTY   = output.IsTerminal
)

// simProgress starts the progress line for s's run on w, if tty says w is
// a terminal, and returns the function that ends it.
func simProgress(s *sim.Scenario, w io.Writer, tty func(io.Writer) bool) func() {
	if !tty(w) {
		return func() {}
	}
	var at atomic.Int64 // simulated time reached, ns
	prev := s.OnCall
	s.OnCall = func(proc int, c sim.Call) {
		at.Store(int64(c.At))
		if prev != nil {
			prev(proc, c)
		}
	}
	total := s.Duration + s.Quiet
	done := make(chan struct{})
	var wg sync.WaitGroup
	shown := false
	wg.Go(func() {
		select {
		case <-done:
			return
		case <-time.After(progressAfter):
		}
		t := time.NewTicker(progressTick)
		defer t.Stop()
		for {
			d := time.Duration(at.Load())
			fmt.Fprintf(w, "\rkvbreaker simulate: %v of %v simulated (%.0f%%)  ", d.Truncate(time.Minute), total, 100*float64(d)/float64(max(total, 1)))
			shown = true
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		s.OnCall = prev
		if shown {
			fmt.Fprint(w, "\r\033[K")
		}
	}
}

// simulateJSON is sim's report in the commands' one JSON style: durations
// in milliseconds ("_ms"), null for not applicable, prose only in
// "message". internal/sim reports durations as text; they are converted
// here.
func simulateJSON(rep *sim.Report, s sim.Scenario, elapsed time.Duration) (map[string]any, error) {
	raw, err := json.Marshal(rep)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	delete(m, "duration")
	delete(m, "quiet")
	m["duration_ms"] = output.Ms(s.Duration)
	m["quiet_ms"] = output.Ms(s.Quiet)
	m["store_ttl_ms"] = nil
	if s.StoreTTL > 0 {
		m["store_ttl_ms"] = output.Ms(s.StoreTTL)
	}
	m["wall_ms"] = output.Ms(elapsed)
	models, _ := m["models"].([]any)
	for _, x := range models {
		mm, ok := x.(map[string]any)
		if !ok {
			continue
		}
		// "30m5s", or "30m5s (store 10m)" under --store-ttl.
		mm["state_ttl_ms"] = nil
		if st, ok := mm["state_ttl"].(string); ok {
			first, _, _ := strings.Cut(st, " ")
			d, err := time.ParseDuration(first)
			if err != nil {
				return nil, fmt.Errorf("simulate: model %v: state TTL %q: %w", mm["model"], st, err)
			}
			mm["state_ttl_ms"] = output.Ms(d)
		}
		delete(mm, "state_ttl")
		refused, _ := mm["refused"].(string)
		mm["refused"] = refused != ""
		mm["message"] = nil
		if refused != "" {
			mm["message"] = refused
		}
		mm["cost_only"] = mm["cost_only"] == true
		for _, k := range []string{"etcd_lease_grants", "lock_retries", "cache", "mirror"} {
			if _, ok := mm[k]; !ok {
				mm[k] = nil
			}
		}
		if c, ok := mm["cache"].(map[string]any); ok {
			if st, ok := c["staleness"].(string); ok {
				d, err := time.ParseDuration(st)
				if err != nil {
					return nil, fmt.Errorf("simulate: cache staleness %q: %w", st, err)
				}
				c["staleness_ms"] = output.Ms(d)
				delete(c, "staleness")
			}
		}
		if c, ok := mm["mirror"].(map[string]any); ok {
			if st, ok := c["delay"].(string); ok {
				d, err := time.ParseDuration(st)
				if err != nil {
					return nil, fmt.Errorf("simulate: mirror delay %q: %w", st, err)
				}
				c["delay_ms"] = output.Ms(d)
				delete(c, "delay")
			}
		}
	}
	return m, nil
}

// writeTable prints rep as the README's demo shows it.
func writeTable(w io.Writer, r *sim.Report, elapsed time.Duration) {
	mode := "sequential: one send in flight per host"
	if r.Races {
		mode = "races: no per-host ordering, bursty arrivals"
	}
	fmt.Fprintf(w, "kvbreaker simulate: %s of traffic simulated in %.2fs (random seed %d, %s)\n", r.Duration, elapsed.Seconds(), r.Seed, mode)
	fmt.Fprintf(w, "fleet: %d workers in %d processes -> %d hosts (%d healthy, %d dead, %d flapping, %d slow), %g arrivals/host/hour, %s popularity\n",
		r.Workers, r.Processes, r.Hosts.Healthy+r.Hosts.Dead+r.Hosts.Flapping+r.Hosts.Slow, r.Hosts.Healthy, r.Hosts.Dead, r.Hosts.Flapping, r.Hosts.Slow, r.Rate, r.Popularity)
	t := r.Trace
	fmt.Fprintf(w, "trace: %s messages, %s deliveries (%s ok, %s failed), %s holds, %s dropped, %s still waiting at the end;\n"+
		"       %s held messages were delivered once their host answered again\n\n",
		Num(t.Messages), Num(t.Deliveries), Num(t.Delivered), Num(t.Failed), Num(t.Holds), Num(t.Dropped), Num(t.Pending), Num(t.DeliveredAfterHold))

	cols := []string{"no breaker"}
	for _, m := range r.Models {
		cols = append(cols, m.Model)
	}
	width := 15
	for _, c := range cols[1:] {
		width = max(width, len(c))
	}
	// line prints one row; a decision row shows "-" for a cost-only model.
	line := func(decision bool, label, base string, f func(m sim.ModelReport) string) {
		fmt.Fprintf(w, "%-34s %13s", label, base)
		for _, m := range r.Models {
			v := "refused"
			switch {
			case m.Refused != "":
			case decision && m.CostOnly:
				v = "-"
			default:
				v = f(m)
			}
			fmt.Fprintf(w, " %*s", width, v)
		}
		fmt.Fprintln(w)
	}
	row := func(label, base string, f func(m sim.ModelReport) string) { line(true, label, base, f) }
	fmt.Fprintf(w, "%-34s %13s", "", cols[0])
	for _, c := range cols[1:] {
		fmt.Fprintf(w, " %*s", width, c)
	}
	fmt.Fprintln(w)
	down := r.Baseline.SendsToDownHosts
	row("sends to down hosts", Num(down), func(m sim.ModelReport) string { return Num(m.SendsToDownHosts) })
	row("  spared vs no breaker", "-", func(m sim.ModelReport) string { return spared(m.SendsToDownHosts, down) })
	row("probes", "-", func(m sim.ModelReport) string { return Num(m.Probes) })
	row("drops (held past hold limit)", "-", func(m sim.ModelReport) string { return Num(m.Drops) })
	row("decisions", "-", func(m sim.ModelReport) string { return Num(m.Decisions) })
	row("agreement with fedify-model", "-", func(m sim.ModelReport) string { return fmt.Sprintf("%.4f%%", 100*m.Agreement) })
	row("  unsafe (sends where it holds)", "-", func(m sim.ModelReport) string { return Num(m.UnsafeDivergences) })
	row("  safe (holds where it sends)", "-", func(m sim.ModelReport) string { return Num(m.SafeDivergences) })
	row("  late probes (same probe, later)", "-", func(m sim.ModelReport) string { return Num(m.LateProbes) })
	row("  send/probe swaps", "-", func(m sim.ModelReport) string { return Num(m.SendProbeSwaps) })
	row("silent closes", "-", func(m sim.ModelReport) string { return Num(m.SilentCloses) })
	row("  sends instead of probe", "-", func(m sim.ModelReport) string { return Num(m.SendsInsteadOfProbe) })
	row("  sends instead of hold", "-", func(m sim.ModelReport) string { return Num(m.SendsInsteadOfHold) })
	row("  late failures counted as closed", "-", func(m sim.ModelReport) string { return Num(m.LateFailuresCountedClosed) })
	row("  reopens after expiry", "-", func(m sim.ModelReport) string { return Num(m.ReopensAfterExpiry) })
	row("  divergences after an expiry", "-", func(m sim.ModelReport) string {
		return fmt.Sprintf("%s (%s unsafe)", Num(m.AfterRecordLoss), Num(m.AfterRecordLossUnsafe))
	})
	row("retry-instant mismatches", "-", func(m sim.ModelReport) string { return Num(m.RetryMismatches) })
	row("state-change label mismatches", "-", func(m sim.ModelReport) string { return Num(m.TransitionMismatches) })
	line(false, "store reads", "-", func(m sim.ModelReport) string { return Num(m.StoreReads) })
	line(false, "store writes", "-", func(m sim.ModelReport) string { return Num(m.StoreWrites) })
	line(false, "requests per 1,000 deliveries", "-", func(m sim.ModelReport) string {
		return fmt.Sprintf("%.1f", m.RequestsPer1000Deliveries)
	})
	line(false, "  etcd lease grants (not in sum)", "-", func(m sim.ModelReport) string {
		if !strings.HasPrefix(m.Model, "kvbreaker") {
			return "-"
		}
		return Num(m.EtcdLeaseGrants)
	})
	line(false, "  lock retries (in writes)", "-", func(m sim.ModelReport) string {
		if !m.CostOnly {
			return "-"
		}
		return Num(m.LockRetries)
	})
	line(false, "cache: Allows served / stale", "-", func(m sim.ModelReport) string {
		if m.Cache == nil {
			return "-"
		}
		return fmt.Sprintf("%s / %s", Num(m.Cache.Served), Num(m.Cache.StaleDecisions))
	})
	mirror := func(label string, f func(m *sim.MirrorReport) string) {
		line(false, label, "-", func(m sim.ModelReport) string {
			if m.Mirror == nil {
				return "-"
			}
			return f(m.Mirror)
		})
	}
	mirror("mirror: delay", func(m *sim.MirrorReport) string { return m.Delay })
	mirror("  requests/1,000 w/o feed reads", func(m *sim.MirrorReport) string {
		return fmt.Sprintf("%.1f", m.RequestsPer1000DeliveriesNoFeedReads)
	})
	mirror("  reads after a Stale (in reads)", func(m *sim.MirrorReport) string { return Num(m.FeedReads) })
	mirror("  Allows served / stale", func(m *sim.MirrorReport) string {
		return fmt.Sprintf("%s / %s", Num(m.Served), Num(m.StaleDecisions))
	})
	mirror("  stale retry instants", func(m *sim.MirrorReport) string { return Num(m.StaleRetries) })
	mirror("  stale outcomes", func(m *sim.MirrorReport) string { return Num(m.StaleOutcomes) })
	mirror("  longest lag among them", func(m *sim.MirrorReport) string { return fmt.Sprintf("%gms", m.MaxLagMS) })
	row("record TTL", "-", func(m sim.ModelReport) string { return m.StateTTL })
	row("peak records", "-", func(m sim.ModelReport) string { return Num(m.PeakRecords) })
	row("records left after "+r.Quiet+" quiet", "-", func(m sim.ModelReport) string { return Num(m.RecordsLeftAfterQuiet) })
	fmt.Fprintln(w)

	var sent []string
	for _, m := range r.Models {
		if m.Refused == "" && !m.CostOnly {
			sent = append(sent, fmt.Sprintf("%s %s", m.Model, Num(m.SendsToDownHosts)))
		}
	}
	fmt.Fprintf(w, "Without a breaker the fleet sent %s deliveries to hosts that were down; %s.\n", Num(down), strings.Join(sent, ", "))
	for _, m := range r.Models {
		if m.Refused != "" {
			fmt.Fprintf(w, "%s refused this configuration:\n  %s\n", m.Model, strings.ReplaceAll(m.Refused, "\n", "\n  "))
		}
	}
	fmt.Fprint(w, `The columns: fedify-model is a Go model of fedify 2.3.x's circuit breaker (not fedify
itself); it is the reference and drives the trace, and the others answer the same calls.
two-field is the design note's record of two fields (failures, restrained-until);
kvbreaker adds a probing bit; +cache is kvbreaker with Settings.CacheSize; +mirror decides
from a mirror each commit reaches after the mirror delay; gobreaker-distributed counts
what sony/gobreaker's distributed breaker would cost in store requests.
Retry-instant and label mismatches of two-field are expected: two fields cannot tell
half-open from open; kvbreaker's probing bit restores them.
`)
	for _, m := range r.Models {
		if mm := m.Mirror; mm != nil && mm.StaleDecisions+mm.StaleRetries+mm.StaleOutcomes > 0 {
			fmt.Fprintf(w, `%s's stale answers (the mirror rows) were decided on a mirror that had not yet
received another process's change or the store's expiry, at most %gms old (the delay is %s).
`, m.Model, mm.MaxLagMS, mm.Delay)
		}
	}
	closes, apart := false, false
	for _, m := range r.Models {
		closes = closes || m.SilentCloses > 0
		apart = apart || m.AfterRecordLoss > 0
	}
	if closes {
		fmt.Fprint(w, `A silent close: a restrained record expired, because its host was not asked again within
the TTL margin after its restraint ended (workers busy, or no traffic) or because the
store's TTL is below the restraint. The circuit closed with no state change reported; the
next decision sent instead of probing (or holding), and later failures counted toward the
threshold afresh.
`)
	}
	if apart {
		fmt.Fprint(w, `A model whose record expired while the reference's did not stays out of step with it until
the host answers again: those divergences are counted apart.
`)
	}
}

func spared(n, of int) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(of-n)/float64(of))
}

// Num formats n with thousands separators.
func Num(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
