package bench

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/internal/machine"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

// workers is the fleet size of TestContention.
const workers = 64

// TestContention: 64 workers, each its own Breaker over its own store
// instance (its own etcd or DynamoDB client), all ask about one host (closed: all send),
// and then all record a failure at once, each from the version its Allow
// read. It asserts that exactly one closed→open transition is
// reported and no other, that the record ends open, and that no call fails;
// it prints the compare-and-swap conflicts (retries) per Failure.
func TestContention(t *testing.T) {
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "backend\tworkers\tfailures\tcas/cad sent\tconflicts\tconflicts per failure\tmost by one worker\tstore reads\twire reads/writes\twall")
	// Workers KV is left out: without compare-and-swap, concurrent
	// workers may each report the opening (documented, and tested in
	// backends/cloudflarekv).
	for _, name := range []string{"memory", "etcd", "dynamodb", "redis", "postgres", "mysql", "nats", "sqlite"} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, name)
			ctx := t.Context()
			var opened, otherChanges atomic.Int64
			s := kvbreaker.Settings{OnStateChange: func(h string, from, to kvbreaker.State) {
				if from == kvbreaker.StateClosed && to == kvbreaker.StateOpen {
					opened.Add(1)
				} else {
					otherChanges.Add(1)
				}
			},
				// The storm counts compare-and-swaps, not latency: 64
				// workers' calls on a loaded machine took longer than the
				// default 5 s, and a timed-out failure was not counted.
				CallTimeout: 30 * time.Second,
			}
			brs := make([]*kvbreaker.Breaker, workers)
			eps := make([]*endpoint, workers)
			for i := range workers {
				brs[i], eps[i] = r.breaker(s)
			}
			const dead = "dead.example"
			start := make(chan struct{})
			errs := make(chan error, 2*workers)
			var wg, allowed sync.WaitGroup
			allowed.Add(workers)
			for _, br := range brs {
				wg.Go(func() {
					<-start
					if _, err := br.Allow(ctx, dead, time.Time{}); err != nil {
						errs <- err
					}
					// Every send was decided on the closed circuit
					// before any failure comes back.
					allowed.Done()
					allowed.Wait()
					if err := br.Failure(ctx, dead); err != nil {
						errs <- err
					}
				})
			}
			begin := time.Now()
			close(start)
			wg.Wait()
			wall := time.Since(begin)
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if n := opened.Load(); n != 1 {
				t.Errorf("%d closed→open transitions reported, want exactly 1", n)
			}
			if n := otherChanges.Load(); n != 0 {
				t.Errorf("%d other transitions reported, want none", n)
			}
			w := r.wireTotal()
			wire := "-"
			if eps[0].wire != nil {
				wire = fmt.Sprintf("%d/%d", w.Reads, w.Writes)
			}
			var calls counts
			var conflicts, most int64
			var adapterConflicts uint64
			for _, e := range eps {
				c := e.calls.load()
				calls.Reads += c.Reads
				calls.Writes += c.Writes
				n := e.conflicts.Load()
				conflicts += n
				most = max(most, n)
				if e.etcd != nil {
					adapterConflicts += e.etcd.Stats().Conflicts
				}
				if e.natsStore != nil {
					adapterConflicts += e.natsStore.Stats().Conflicts
				}
			}
			if (name == "etcd" || name == "nats") && adapterConflicts != uint64(conflicts) {
				t.Errorf("%s Store.Stats counts %d conflicts, the store wrapper %d", name, adapterConflicts, conflicts)
			}
			// A lost write costs no read on etcd (the Txn's Else branch
			// returns the record), Redis or PostgreSQL (the script and
			// the statement return it), and one more request on
			// dynalite (no ALL_OLD), MySQL (an UPDATE answers a row
			// count) and NATS (a refused publish answers an error).
			extra := map[string]int64{"etcd": 0, "dynamodb": conflicts, "redis": 0, "postgres": 0, "mysql": conflicts, "nats": conflicts}
			if x, ok := extra[name]; ok && (w.Reads != calls.Reads+x || w.Writes != calls.Writes) {
				t.Errorf("wire: %d reads, %d writes for %d store reads, %d store writes and %d conflicts", w.Reads, w.Writes, calls.Reads, calls.Writes, conflicts)
			}
			// Opening takes FailureThreshold won writes; every other
			// write lost a compare-and-swap.
			threshold := int64(kvbreaker.Settings{}.WithDefaults().FailureThreshold)
			if won := calls.Writes - conflicts; won != threshold {
				t.Errorf("%d writes won, want %d (the threshold): failures after the opening must not write", won, threshold)
			}
			if st, err := brs[0].Inspect(ctx, dead); err != nil || st.State != kvbreaker.StateOpen {
				t.Errorf("record after the storm: %v, %v; want open", st.State, err)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.2f\t%d\t%d\t%s\t%v\n", name, workers, workers, calls.Writes, conflicts,
				float64(conflicts)/workers, most, calls.Reads, wire, wall.Round(time.Millisecond))
		})
	}
	tw.Flush()
	t.Log("64 workers, one host: all Allow (closed), then all Failure at once:\n" + sb.String())
}

// TestRecordSizeAndLeases reports the encoded size of an open record
// (threshold 5, so five failure instants) and etcd lease grants per 1,000
// record writes through Breaker (1,000 first failures on distinct hosts,
// with the adapter's default lease pooling), cross-checked against the
// LeaseGrant calls seen on the wire.
func TestRecordSizeAndLeases(t *testing.T) {
	cfg, err := machine.NewConfig(machine.Config{}, memory.New().Traits())
	if err != nil {
		t.Fatal(err)
	}
	var rec record.Record
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for i := range cfg.FailureThreshold {
		rec = machine.FailureStep(rec, now.Add(time.Duration(i)*1234*time.Millisecond), &cfg).Record
	}
	if kvbreaker.State(rec.State()) != kvbreaker.StateOpen {
		t.Fatalf("after %d failures the record is %v", cfg.FailureThreshold, rec.State())
	}
	open := len(record.EncodeRecord(rec))
	one := len(record.EncodeRecord(machine.FailureStep(record.Record{}, now, &cfg).Record))
	if open > 128 {
		t.Errorf("an open threshold-5 record encodes to %d bytes", open)
	}

	r := newRig(t, "etcd")
	br, e := r.breaker(kvbreaker.Settings{})
	before := e.wire.load() // etcd.New's minimum-TTL probe: a grant and a revoke
	const writes = 1000
	var wg sync.WaitGroup
	var failed atomic.Int64
	jobs := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range jobs {
				if err := br.Failure(t.Context(), fmt.Sprintf("h%d.example", i)); err != nil {
					failed.Add(1)
					t.Error(err)
				}
			}
		})
	}
	for i := range writes {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	st := e.etcd.Stats()
	if st.Writes != writes || failed.Load() != 0 {
		t.Fatalf("etcd store counted %d writes for %d failures (%d failed)", st.Writes, writes, failed.Load())
	}
	if wire := e.wire.load().sub(before).Other; uint64(wire) != st.Grants {
		t.Errorf("Stats says %d grants, the wire saw %d non-KV calls", st.Grants, wire)
	}
	if g := st.GrantsPer1000Writes(); g > 5 {
		t.Errorf("%.1f lease grants per 1,000 writes, want a handful at most (pooling)", g)
	}
	t.Logf("record size: open (threshold 5) %d bytes, closed with one failure %d bytes\n"+
		"etcd: %d writes, %d lease grants (%.1f per 1,000 writes), %d writes on a pooled lease",
		open, one, st.Writes, st.Grants, st.GrantsPer1000Writes(), st.Reused)
}
