package adapter

import (
	"cmp"
	"time"
)

// PendingBeats holds a feed's beats that wait for its changes to catch up
// (etcd, NATS): a beat sent at At read the store's position in its order
// of commits as Pos (etcd's revision, a NATS consumer's sequence); once
// the feed has delivered every change up to Pos, every commit acknowledged
// before At has been delivered, and the feed may send Synced{At}. A beat
// only proves what its own read saw, so the feed waits for its changes
// rather than trust the read's time alone.
//
// Its zero value holds any number of beats; Max bounds them. A
// PendingBeats is not safe for concurrent use: a feed keeps one on the
// goroutine that receives its changes.
type PendingBeats[P cmp.Ordered] struct {
	// Max bounds the beats held, when positive: adding one more drops
	// the oldest, so a feed that far behind sends no Synced until it
	// catches up with a newer beat.
	Max   int
	beats []pendingBeat[P]
}

type pendingBeat[P cmp.Ordered] struct {
	at  time.Time
	pos P
}

// Add holds a beat sent at at whose read found the store at pos, dropping
// the oldest beyond Max.
func (p *PendingBeats[P]) Add(at time.Time, pos P) {
	if p.Max > 0 && len(p.beats) >= p.Max {
		p.beats = append(p.beats[:0], p.beats[len(p.beats)-p.Max+1:]...)
	}
	p.beats = append(p.beats, pendingBeat[P]{at, pos})
}

// Reached drops the beats the feed has reached, having delivered every
// change up to seen, and returns the newest one's instant: what Synced
// may say (ok false: none was reached).
func (p *PendingBeats[P]) Reached(seen P) (at time.Time, ok bool) {
	i := 0
	for i < len(p.beats) && p.beats[i].pos <= seen {
		i++
	}
	if i == 0 {
		return time.Time{}, false
	}
	at = p.beats[i-1].at
	p.beats = append(p.beats[:0], p.beats[i:]...)
	return at, true
}

// Oldest is the beat that has waited longest: when it was sent and the
// position it waits for (ok false: none waits). A feed that has not
// reached it long after is stalled.
func (p *PendingBeats[P]) Oldest() (at time.Time, pos P, ok bool) {
	if len(p.beats) == 0 {
		return time.Time{}, pos, false
	}
	return p.beats[0].at, p.beats[0].pos, true
}

// Newest is when the latest beat held was sent (ok false: none waits): a
// feed sends no other beat while it is fresh.
func (p *PendingBeats[P]) Newest() (at time.Time, ok bool) {
	if len(p.beats) == 0 {
		return time.Time{}, false
	}
	return p.beats[len(p.beats)-1].at, true
}
