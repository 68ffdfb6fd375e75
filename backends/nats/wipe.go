package nats

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrFeedWiped: messages the feed had delivered left the stream without a
// message of the feed saying so (the stream or a subject purged, a message
// deleted, the bucket deleted and created again): an operator removed them
// behind the adapters' back, and the feed resynchronises.
var ErrFeedWiped = errors.New("messages removed behind the feed's back")

// wipeWatch is what a follower knows of the stream to tell a wipe from the
// removals the bucket makes itself. With one revision per key and TTL
// markers, the bucket removes a message only when a later one of the same
// subject replaces it (a write, a delete's marker, an expiry's marker), or
// a marker when its own TTL ends; so the stream's message and subject
// counts never fall except by expired markers, and a subject that holds a
// live key the feed delivered never disappears. Each heartbeat asks for
// the stream's state (one request); when a count fell or the stream is not
// the one the feed began on, it asks which subjects of the prefix remain
// (one request, its answer the size of the prefix's keys) and reports a
// wipe if a delivered live key's subject is gone.
type wipeWatch struct {
	created time.Time
	last    *jetstream.StreamState
	st      jetstream.Stream    // the stream, as the session's first check read it
	live    map[string]struct{} // keys delivered as live, by subject
}

// reset starts the watch of a new consumer.
func (w *wipeWatch) reset() { *w = wipeWatch{live: make(map[string]struct{})} }

// put and del record what the feed delivered for a subject.
func (w *wipeWatch) put(subject string) { w.live[subject] = struct{}{} }
func (w *wipeWatch) del(subject string) { delete(w.live, subject) }

// checkWipe reads the stream's state (one request) and compares it
// (compareWipe). It returns ErrFeedWiped (wrapped) for a wipe, or the
// request's error.
func (f *follower) checkWipe(ctx context.Context) error {
	st, err := f.s.js.Stream(ctx, f.s.stream)
	if err != nil {
		return err
	}
	f.wipe.st = st
	info := st.CachedInfo()
	return f.compareWipe(ctx, info.Created, info.State, false)
}

// compareWipe compares the stream's state, created and state, with the
// last one seen, and the prefix's subjects with the live keys delivered
// when a count fell (one request). carried: the state is another
// follower's reading, carried by a beat (beat.go), which may be older
// than the last one seen: one whose last sequence is behind it is not
// kept, and is settled by the subjects rather than taken for a wipe.
func (f *follower) compareWipe(ctx context.Context, created time.Time, state jetstream.StreamState, carried bool) error {
	w := &f.wipe
	prev := w.last
	switch {
	case w.created.IsZero():
		w.created, w.last = created, &state
		return nil
	case !created.Equal(w.created):
		return fmt.Errorf("%w: the stream %s was created again at %v", ErrFeedWiped, f.s.stream, created)
	case prev == nil:
		w.last = &state
		return nil
	case state.LastSeq < prev.LastSeq && carried:
	case state.LastSeq < prev.LastSeq:
		w.last = &state
		return fmt.Errorf("%w: the stream's last sequence went back from %d to %d", ErrFeedWiped, prev.LastSeq, state.LastSeq)
	case state.Msgs >= prev.Msgs && state.NumSubjects >= prev.NumSubjects:
		w.last = &state
		return nil
	default:
		w.last = &state
	}
	if len(w.live) == 0 || w.st == nil {
		return nil
	}
	full, err := w.st.Info(ctx, jetstream.WithSubjectFilter(f.filter))
	if err != nil {
		return err
	}
	for subject := range w.live {
		if full.State.Subjects[subject] == 0 {
			return fmt.Errorf("%w: %s, delivered as live, has no message in the stream (%d messages, %d before)", ErrFeedWiped, subject, state.Msgs, prev.Msgs)
		}
	}
	return nil
}
