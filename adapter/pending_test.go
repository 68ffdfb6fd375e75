package adapter

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestPendingBeatsAgainstModel: over random runs of beats (positions that
// never go back, as a store's order does not) and deliveries, Reached
// reports the newest beat at or below the delivered position, exactly when
// one is held, and at most Max are held, the newest kept: checked against
// a plain list that keeps every beat and forgets the dropped ones by index.
func TestPendingBeatsAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(39, 7))
	base := time.Unix(1_700_000_000, 0)
	for run := range 300 {
		p := PendingBeats[uint64]{Max: r.IntN(4)} // 0: unbounded
		type beat struct {
			at  time.Time
			pos uint64
		}
		var model []beat
		var pos, seen uint64
		for step := range 60 {
			if r.IntN(2) == 0 {
				pos += uint64(r.IntN(3))
				at := base.Add(time.Duration(run*100+step) * time.Millisecond)
				p.Add(at, pos)
				model = append(model, beat{at, pos})
				if p.Max > 0 && len(model) > p.Max {
					model = model[len(model)-p.Max:]
				}
			} else {
				seen = min(pos, seen+uint64(r.IntN(3)))
				i := 0
				for i < len(model) && model[i].pos <= seen {
					i++
				}
				at, ok := p.Reached(seen)
				if ok != (i > 0) || ok && !at.Equal(model[i-1].at) {
					t.Fatalf("run %d step %d: Reached(%d) = %v, %v; the model says %d reached of %v", run, step, seen, at, ok, i, model)
				}
				model = model[i:]
			}
			oa, op, ok := p.Oldest()
			na, nok := p.Newest()
			if ok != (len(model) > 0) || nok != ok {
				t.Fatalf("run %d step %d: Oldest ok %v, Newest ok %v with %d held", run, step, ok, nok, len(model))
			}
			if ok && (!oa.Equal(model[0].at) || op != model[0].pos || !na.Equal(model[len(model)-1].at)) {
				t.Fatalf("run %d step %d: Oldest %v@%d, Newest %v; the model holds %v", run, step, oa, op, na, model)
			}
		}
	}
}

// TestPendingBeatsBounded: a feed far behind holds only the newest Max
// beats, and the zero value holds none.
func TestPendingBeatsBounded(t *testing.T) {
	var zero PendingBeats[int64]
	if _, _, ok := zero.Oldest(); ok {
		t.Fatal("the zero PendingBeats holds a beat")
	}
	if _, ok := zero.Reached(1 << 62); ok {
		t.Fatal("the zero PendingBeats reached a beat")
	}
	p := PendingBeats[int64]{Max: 8}
	t0 := time.Unix(0, 0)
	for i := range 20 {
		p.Add(t0.Add(time.Duration(i)*time.Second), int64(100+i))
	}
	if at, pos, _ := p.Oldest(); pos != 112 || !at.Equal(t0.Add(12*time.Second)) {
		t.Fatalf("after 20 beats with Max 8, the oldest is %v@%d, want the 13th (12s@112)", at, pos)
	}
	if at, ok := p.Reached(50); ok {
		t.Fatalf("Reached(50) = %v with every beat above it", at)
	}
	if at, ok := p.Reached(115); !ok || !at.Equal(t0.Add(15*time.Second)) {
		t.Fatalf("Reached(115) = %v, %v; want 15s", at, ok)
	}
}
