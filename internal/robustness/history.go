package robustness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/kvbreaker/kvbreaker/driver"
)

// Op names the call an Event records.
type Op string

// The recorded calls: the Breaker's (through the Caller the worker uses)
// and the store's (beneath the Breaker, each worker's own adapter).
const (
	OpAllow   Op = "allow"
	OpFailure Op = "failure"
	OpSuccess Op = "success"
	OpGet     Op = "get"
	OpCAS     Op = "cas"
	OpCAD     Op = "cad"
)

// Event is one call: who made it, when it started and ended (since the
// run's start, on the monotonic clock), what it was given and what it
// answered.
type Event struct {
	Worker int           `json:"worker"`
	Op     Op            `json:"op"`
	Key    string        `json:"key"` // the host of a Breaker call, the store key of a store call
	Start  time.Duration `json:"start"`
	End    time.Duration `json:"end"`
	Err    string        `json:"err,omitempty"`

	// Breaker calls: the fleet clock's readings during the call (distinct
	// milliseconds, so an instant in a record names the call that read
	// it), and Allow's decision.
	Now      []time.Time `json:"now,omitempty"`
	Decision string      `json:"decision,omitempty"`

	// Store calls. Old is the version compared (CAS, CAD); Value what a
	// CAS wrote or a Get read; Ver the version a CAS created or a Get
	// read; TTL a CAS's. Outcome: Found (Get), OK, NotFound, Conflict
	// (with the current value and version when the adapter said), or
	// Unknown (an error that leaves the outcome open).
	Old      driver.Version `json:"old,omitempty"`
	Value    []byte         `json:"value,omitempty"`
	Ver      driver.Version `json:"ver,omitempty"`
	TTL      time.Duration  `json:"ttl,omitempty"`
	Found    bool           `json:"found,omitempty"`
	OK       bool           `json:"ok,omitempty"`
	NotFound bool           `json:"notFound,omitempty"`
	Conflict bool           `json:"conflict,omitempty"`
	HasCur   bool           `json:"hasCur,omitempty"`
	CurVer   driver.Version `json:"curVer,omitempty"`
	CurValue []byte         `json:"curValue,omitempty"`
	Unknown  bool           `json:"unknown,omitempty"`
}

// FaultEvent is one injected fault, from injection to heal.
type FaultEvent struct {
	Fault
	Injected time.Duration `json:"injected"`
	Healed   time.Duration `json:"healed"`
	Err      string        `json:"err,omitempty"`
}

// History is what a run recorded. Its methods are safe for concurrent use.
type History struct {
	Seed   int64        `json:"seed"`
	Store  string       `json:"store"`
	Events []Event      `json:"events"`
	Faults []FaultEvent `json:"faults"`
	// Heal is when the last fault healed (and the hosts took their final
	// health); End when the run's last call returned.
	Heal time.Duration `json:"heal"`
	End  time.Duration `json:"end"`
	// Stalls are the spans in which the process ran none of its
	// goroutines (watchStalls).
	Stalls []Stall `json:"stalls,omitempty"`

	mu    sync.Mutex
	start time.Time
}

func (h *History) since() time.Duration { return time.Since(h.start) }

// Stall is a span in which the process ran none of its goroutines: a
// ticker's tick was taken more than stallMin after the one before. On a
// loaded machine the process can wait seconds for a core; every call that
// overlaps the span was stretched by it, whatever the code under test did.
type Stall struct {
	From time.Duration `json:"from"`
	To   time.Duration `json:"to"`
}

const (
	stallTick = 10 * time.Millisecond
	stallMin  = 100 * time.Millisecond
)

// watchStalls records the stalls from from (a goroutine started late
// was stalled too) until stop or done closes.
func (h *History) watchStalls(from time.Duration, stop, done <-chan struct{}) {
	t := time.NewTicker(stallTick)
	defer t.Stop()
	last := from
	for {
		select {
		case <-stop:
			return
		case <-done:
			return
		case <-t.C:
		}
		now := h.since()
		if now-last > stallMin {
			h.mu.Lock()
			h.Stalls = append(h.Stalls, Stall{From: last, To: now})
			h.mu.Unlock()
		}
		last = now
	}
}

// stalled returns how much of [from, to] the recorded stalls cover.
func (h *History) stalled(from, to time.Duration) time.Duration {
	var sum time.Duration
	for _, s := range h.Stalls {
		if a, b := max(s.From, from), min(s.To, to); b > a {
			sum += b - a
		}
	}
	return sum
}

func (h *History) add(e Event) {
	h.mu.Lock()
	h.Events = append(h.Events, e)
	h.mu.Unlock()
}

// WriteFile writes the history as JSON to dir (os.TempDir() if empty) and
// returns the file's path.
func (h *History) WriteFile(dir string) (string, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	h.mu.Lock()
	b, err := json.MarshalIndent(h, "", " ")
	h.mu.Unlock()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("kvbreaker-robustness-%s-seed%d.json", h.Store, h.Seed))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return "", err
	}
	return path, nil
}

// recordingStore records every call a worker's Breaker makes to its store.
type recordingStore struct {
	driver.Store
	h      *History
	worker int
}

func (s *recordingStore) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	e := Event{Worker: s.worker, Op: OpGet, Key: key, Start: s.h.since()}
	v, ver, err := s.Store.Get(ctx, key)
	e.End = s.h.since()
	switch {
	case err == nil:
		e.Found, e.Value, e.Ver = true, v, ver
	case errors.Is(err, driver.ErrNotFound):
		e.NotFound = true
	default:
		e.Unknown, e.Err = true, err.Error()
	}
	s.h.add(e)
	return v, ver, err
}

func (s *recordingStore) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	e := Event{Worker: s.worker, Op: OpCAS, Key: key, Old: old, Value: value, TTL: ttl, Start: s.h.since()}
	ver, err := s.Store.CompareAndSwap(ctx, key, old, value, ttl)
	e.End = s.h.since()
	s.outcome(&e, err)
	e.Ver = ver
	s.h.add(e)
	return ver, err
}

func (s *recordingStore) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	e := Event{Worker: s.worker, Op: OpCAD, Key: key, Old: old, Start: s.h.since()}
	err := s.Store.CompareAndDelete(ctx, key, old)
	e.End = s.h.since()
	s.outcome(&e, err)
	s.h.add(e)
	return err
}

func (s *recordingStore) outcome(e *Event, err error) {
	var ce *driver.ConflictError
	switch {
	case err == nil:
		e.OK = true
	case errors.As(err, &ce):
		e.Conflict, e.HasCur, e.CurVer, e.CurValue = true, true, ce.Version, ce.Value
	case errors.Is(err, driver.ErrConflict):
		e.Conflict = true
	case errors.Is(err, driver.ErrNotFound):
		e.NotFound = true
	default:
		e.Unknown = true
	}
	if err != nil {
		e.Err = err.Error()
	}
}

// fleetClock is the fleet's clock, to the millisecond and never going
// back. Failure calls read distinct milliseconds, so that each failure
// instant a record stores names the one call that read it; the other
// calls share them, so that the clock keeps to real time.
type fleetClock struct {
	mu   sync.Mutex
	last time.Time
}

func (c *fleetClock) now(distinct bool) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := time.Now().Round(0).Truncate(time.Millisecond)
	if t.Before(c.last) || (distinct && t.Equal(c.last)) {
		t = c.last
		if distinct {
			t = t.Add(time.Millisecond)
		}
	}
	c.last = t
	return t
}

// workerClock is one worker's view of the fleet clock: it keeps the
// readings of the worker's current call (a worker makes one call at a
// time; the mutex covers a Breaker's own goroutines).
type workerClock struct {
	fleet    *fleetClock
	mu       sync.Mutex
	distinct bool // the current call is a Failure
	reads    []time.Time
}

func (c *workerClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.fleet.now(c.distinct)
	c.reads = append(c.reads, t)
	return t
}

// begin starts a call: its readings are kept from now on.
func (c *workerClock) begin(op Op) {
	c.mu.Lock()
	c.distinct, c.reads = op == OpFailure, nil
	c.mu.Unlock()
}

func (c *workerClock) take() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reads
	c.reads = nil
	return r
}

// writeVisualization writes porcupine's view of an illegal key history
// beside the history file.
func writeVisualization(dir string, h *History, key string, model porcupine.Model, info porcupine.LinearizationInfo) (string, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("kvbreaker-robustness-%s-seed%d-%s.html", h.Store, h.Seed, strings.NewReplacer("/", "_", " ", "_").Replace(key)))
	return path, porcupine.VisualizePath(model, info, path)
}
