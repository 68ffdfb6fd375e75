package etcd

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A feed on demand (FollowDemand) proves itself current with a beat that
// every follower of the prefix receives: a put of a reserved key inside the
// prefix, which each follower's watch delivers in revision order with the
// prefix's own changes. A follower that receives the beat at revision R has
// delivered every change below R, and every write acknowledged before the
// beat committed has a revision below R (etcd is linearizable): one beat
// serves every follower, whoever sent it, and the fleet's timers, reset by
// its arrival, send about one per heartbeat between them.
//
// Dating it is the hard part: no answer of etcd's carries a clock, and the
// sender's clock is not the receiver's. So a beat carries no clock reading
// at all, only elapsed times: for the newest beat of each sender it heard
// (its own included), "I sent this Δ after that beat, at revision R′,
// reached me", by the sender's monotonic clock. A receiver that has dated
// R′ by its own clock (L(R′), no later than R′'s commit) dates the new
// beat L(R′) + Δ less 500 ppm of Δ, the latest of these: R′ committed
// before its sender received it, and the new beat was sent Δ after that,
// so it committed at least that much later. The dates start from the
// receiver's own actions only: its own beat (sent at t, so it committed
// after t), its snapshot's linearizable read and, on the per-process
// fallback, each of its reads (sent at t, answered at revision r: every
// revision after r committed after t). No wall clock of another process
// takes part, and no two wall clocks are compared.
//
// A date from the receiver's own beat is one delivery (of its beat to the
// sender) and one put (the sender's) behind; a date through other beats
// loses that at every hop, which is why each sender refers to every
// sender it heard rather than only to the newest beat: a receiver that
// beat within beatLeaseRenew finds its own among the references (up to
// beatRefs senders). The lag moves the receiver's newest Synced back,
// which makes its timer fire earlier than the sender's. A chain never
// dates a beat after its arrival; one that would (a sender's clock that
// ran faster than the drift allows, a forged payload) is dropped.
//
// The key is the prefix followed by beatSuffix, whose NUL no host key
// contains (driver.ValidateKey refuses control characters): List and the
// snapshot skip it, and the watch never delivers it as a record. It is put
// with a lease of the sender's (beatLeaseTTL, 10 minutes), granted again
// every beatLeaseRenew, so that a prefix no one beats any more keeps it
// for at most 10 minutes.
//
// A client refused the put (etcd's RBAC: a user who may read the prefix
// but not write it) proves its feed current for itself, as Follow does (a
// linearizable read and a progress request), and still takes the fleet's
// beats it can date.
const (
	beatSuffix    = "\x00kvbreaker-beat"
	beatPayload   = "kvbreaker-beat"
	beatLeaseTTL  = 600  // seconds
	beatDriftPPM  = 500  // the most NTP slews a clock
	beatsRemember = 1024 // dated beats kept, by revision, for the chain: 12 min at a beat per 750 ms
	beatRefs      = 16   // the senders a beat refers to, at most
)

// beatLeaseRenew is how old a sender's lease may be when it puts a beat:
// half its TTL, so that the key outlives the fleet's last beat by 5 to
// 10 minutes, and a sender of a beat every 750 ms grants a lease per 400
// beats. It also bounds how long a sender refers to a beat it heard.
const beatLeaseRenew = 5 * time.Minute

// isBeatKey reports whether key is a beat's, of any prefix.
func isBeatKey(key []byte) bool {
	return strings.HasSuffix(string(key), beatSuffix)
}

// beatCounts counts, over every feed of the process, what the fleet beats
// cost and did: beats put, lease grants, beats dropped as dated after
// their arrival, the followers that fell back to beating for themselves,
// and how long before its arrival each beat dated by a chain was dated,
// in all: what the feed cost model (internal/model) is held to, and what
// the tests report.
var beatCounts struct{ put, grants, rejected, fallbacks, lag, lagN atomic.Int64 }

// Test hooks. ignoreOthersBeats makes a follower date no beat by another's
// chain (the negative control of the fleet's sharing); beatDeltaSkew adds
// that many nanoseconds to every beat's Δ as a sender's fast clock would,
// and acceptLateBeats delivers a beat whatever instant it dates to:
// together the negative control of the arrival check.
// noFallback makes a follower refused the put go on trying it instead of
// beating for itself: the negative control of the fallback.
var (
	noFallback        atomic.Bool
	ignoreOthersBeats atomic.Bool
	beatDeltaSkew     atomic.Int64
	acceptLateBeats   atomic.Bool
)

// fleetBeats is one follower's beating on demand for the fleet, on the
// feed's goroutine.
type fleetBeats struct {
	f   *follower
	key string
	// jitter, drawn anew with each Synced, is how much longer than the
	// heartbeat this follower lets its newest Synced age before it beats.
	jitter time.Duration
	lease  clientv3.LeaseID
	leased time.Time // when lease was granted (asked)
	// sent is when this follower's beat under way was sent (zero: none
	// is), ownRev its revision.
	sent   time.Time
	ownRev int64
	// anchor: every revision after anchorRev committed after anchorAt.
	anchorAt  time.Time
	anchorRev int64
	// dated holds the dates of the newest beats received, by revision.
	dated map[int64]time.Time
	order []int64
	// id names this follower's beats; heard holds the newest beat
	// received from each sender, its own included, which its beats refer
	// to.
	id    string
	heard map[string]heardBeat
}

// heardBeat is the newest beat received from one sender.
type heardBeat struct {
	rev     int64
	arrival time.Time
}

func newFleetBeats(f *follower) *fleetBeats {
	b := &fleetBeats{f: f, key: f.Prefix + beatSuffix, id: strconv.FormatUint(rand.Uint64(), 36)}
	b.drawJitter()
	return b
}

func (b *fleetBeats) drawJitter() { b.jitter = rand.N(b.f.Heartbeat/8 + 1) }

// timeout bounds a request, and how long this follower's own beat may take
// to come back through the watch.
func (b *fleetBeats) timeout() time.Duration { return max(b.f.Heartbeat, time.Second) }

// restart forgets what a session knew: a new snapshot, read at rev after
// at, is the only anchor; the chain's revisions may name another history
// (a restored backup) after a resynchronisation.
func (b *fleetBeats) restart(at time.Time, rev int64) {
	b.sent, b.ownRev = time.Time{}, 0
	b.anchorAt, b.anchorRev = at, rev
	b.dated, b.order = map[int64]time.Time{}, b.order[:0]
	b.heard = map[string]heardBeat{}
}

// anchored records that every revision after rev committed after at.
func (b *fleetBeats) anchored(at time.Time, rev int64) {
	if at.After(b.anchorAt) {
		b.anchorAt, b.anchorRev = at, rev
	}
}

// due reports whether a beat is wanted at now.
func (b *fleetBeats) due(now time.Time) bool {
	return b.sent.IsZero() && now.Sub(b.f.Last()) >= b.f.Heartbeat+b.jitter
}

// overdue reports an error when this follower's own beat has not come back
// within the timeout: a watch that no longer delivers.
func (b *fleetBeats) overdue(now time.Time) error {
	if !b.sent.IsZero() && now.Sub(b.sent) > b.timeout() {
		return fmt.Errorf("the feed's own beat (revision %d) did not arrive within %v", b.ownRev, b.timeout())
	}
	return nil
}

// send puts a beat, granting a lease first when this follower has none
// younger than beatLeaseRenew. It reports refused when the server will not
// let this client put it (permission): the caller falls back to beating
// for itself.
func (b *fleetBeats) send(ctx context.Context) (refused bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout())
	defer cancel()
	for attempt := 0; ; attempt++ {
		now := time.Now()
		if b.lease == clientv3.NoLease || now.Sub(b.leased) >= beatLeaseRenew {
			resp, err := b.f.s.cli.Grant(ctx, beatLeaseTTL)
			beatCounts.grants.Add(1)
			if err != nil {
				return permissionDenied(err), fmt.Errorf("grant the beat's lease: %w", err)
			}
			b.lease, b.leased = resp.ID, now
		}
		sent := time.Now()
		payload := b.payload(sent)
		resp, err := b.f.s.cli.Put(ctx, b.key, payload, clientv3.WithLease(b.lease))
		beatCounts.put.Add(1)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
			// Revoked or expired early (a restarted cluster): grant anew.
			b.lease = clientv3.NoLease
			continue
		}
		if err != nil {
			return permissionDenied(err), fmt.Errorf("put a beat: %w", err)
		}
		b.sent, b.ownRev = sent, resp.Header.Revision
		return false, nil
	}
}

// permissionDenied reports whether err is etcd refusing this user a write.
func permissionDenied(err error) bool {
	return errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrGRPCPermissionDenied)
}

// received dates a beat event at revision rev with value payload that
// arrived at arrival: the instant, by this process's clock, before which
// every change of the prefix has been delivered, and ok when it is newer
// than the newest Synced.
func (b *fleetBeats) received(rev int64, payload []byte, arrival time.Time) (at time.Time, ok bool) {
	if b.ownRev != 0 && rev >= b.ownRev {
		// This follower's own beat, or a later one: committed after sent.
		at = b.sent
		b.anchored(b.sent, b.ownRev-1)
		b.sent, b.ownRev = time.Time{}, 0
	}
	if rev > b.anchorRev && b.anchorAt.After(at) {
		at = b.anchorAt
	}
	id, refs, valid := parseBeat(payload)
	if valid && !ignoreOthersBeats.Load() {
		if c, ok := b.chained(refs); ok && c.After(at) {
			if c.After(arrival) && !acceptLateBeats.Load() {
				// Not a lower bound: a sender's clock ran too fast, or
				// the payload is wrong. The rest of the date stands.
				beatCounts.rejected.Add(1)
			} else {
				at = c
				beatCounts.lag.Add(int64(arrival.Sub(c)))
				beatCounts.lagN.Add(1)
			}
		}
	}
	if valid {
		b.heard[id] = heardBeat{rev, arrival}
	}
	if !at.IsZero() {
		b.remember(rev, at)
	}
	if at.IsZero() || !at.After(b.f.Last()) {
		return time.Time{}, false
	}
	b.drawJitter()
	return at, true
}

// payload is the beat this follower sends at sent: its id, and for the
// newest beat of each sender it heard within beatLeaseRenew (at most
// beatRefs of them), its revision and how long before sent it arrived.
func (b *fleetBeats) payload(sent time.Time) string {
	var sb strings.Builder
	sb.WriteString(beatPayload + " " + b.id)
	n := 0
	for id, h := range b.heard {
		switch d := sent.Sub(h.arrival); {
		case d > beatLeaseRenew:
			delete(b.heard, id)
		case n < beatRefs:
			fmt.Fprintf(&sb, " %d %d", h.rev, d.Nanoseconds())
			n++
		}
	}
	return sb.String()
}

// beatRef is a beat a beat refers to: its revision, and how long after
// that beat arrived at the sender this one was sent.
type beatRef struct {
	rev   int64
	delta time.Duration
}

// parseBeat reads a beat's payload; ok is false for one kvbreaker did not
// send.
func parseBeat(payload []byte) (id string, refs []beatRef, ok bool) {
	fields := strings.Fields(string(payload))
	if len(fields) < 2 || len(fields)%2 != 0 || fields[0] != beatPayload {
		return "", nil, false
	}
	for i := 2; i < len(fields); i += 2 {
		rev, err1 := strconv.ParseInt(fields[i], 10, 64)
		delta, err2 := strconv.ParseInt(fields[i+1], 10, 64)
		if err1 != nil || err2 != nil || delta < 0 {
			return "", nil, false
		}
		refs = append(refs, beatRef{rev, time.Duration(delta)})
	}
	return fields[1], refs, true
}

// chained dates a beat by the beats it refers to: each one's date here,
// plus the time the sender waited after receiving it, less the drift
// allowed over that time; the latest stands. Every sender refers to the
// newest beat of each sender it heard, so a receiver that beat within
// beatLeaseRenew finds its own among them: a date one delivery and one
// put behind, which does not grow with the beats it did not send.
func (b *fleetBeats) chained(refs []beatRef) (time.Time, bool) {
	var best time.Time
	for _, r := range refs {
		base, ok := b.dated[r.rev]
		if !ok {
			continue
		}
		d := r.delta + time.Duration(beatDeltaSkew.Load())
		if at := base.Add(d - (d*beatDriftPPM+999_999)/1_000_000); at.After(best) {
			best = at
		}
	}
	return best, !best.IsZero()
}

// remember keeps rev's date for the beats that will refer to it.
func (b *fleetBeats) remember(rev int64, at time.Time) {
	if _, ok := b.dated[rev]; !ok {
		b.order = append(b.order, rev)
	}
	b.dated[rev] = at
	if len(b.order) > beatsRemember {
		delete(b.dated, b.order[0])
		b.order = append(b.order[:0], b.order[1:]...)
	}
}
