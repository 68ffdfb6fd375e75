package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
)

// DecideRequest is POST /v1/decide's body: the deliveries about to be
// sent, each to a host.
type DecideRequest struct {
	Deliveries []Delivery `json:"deliveries"`
}

// Delivery is one delivery to ask about.
type Delivery struct {
	// Host is a host name or a delivery URL (kvbreaker.HostKey makes it
	// the circuit's key).
	Host string `json:"host"`
	// HeldSince is the held_since of the previous answer for this
	// message, when it was held; absent the first time.
	HeldSince *time.Time `json:"held_since,omitempty"`
}

// DecideResponse answers POST /v1/decide, one verdict per delivery, in
// order.
type DecideResponse struct {
	Verdicts []Verdict `json:"verdicts"`
}

// Verdict is Breaker.Allow's answer for one delivery.
type Verdict struct {
	Host string `json:"host"`
	// Decision: send, hold, probe or drop.
	Decision string `json:"decision"`
	// RetryAt is when to ask again (hold only), RetryInMS the same as a
	// delay from the server's clock.
	RetryAt   *time.Time `json:"retry_at"`
	RetryInMS *int64     `json:"retry_in_ms"`
	// HeldSince is what to send back as held_since when asking again
	// (hold only).
	HeldSince *time.Time `json:"held_since"`
	// ProbeID names this probe when reporting its outcome or abandoning
	// it (probe only; null when the server could not remember it).
	ProbeID *string `json:"probe_id"`
	// Error is the store's error when it failed: the decision is then
	// what the Breaker decides without the store (send, or hold when it
	// fails closed).
	Error *string `json:"error"`
}

// OutcomesRequest is POST /v1/outcomes's body.
type OutcomesRequest struct {
	Outcomes []Outcome `json:"outcomes"`
}

// Outcome is what one delivery said about its host.
type Outcome struct {
	Host string `json:"host"`
	// Outcome: success, reachable-failure, failure or ignore.
	Outcome string `json:"outcome"`
	// ProbeID is the probe_id of the verdict, for a probe: with ignore,
	// the probe is abandoned (its claim released).
	ProbeID string `json:"probe_id,omitempty"`
}

// OutcomesResponse answers POST /v1/outcomes, one result per outcome.
type OutcomesResponse struct {
	Results []OutcomeResult `json:"results"`
}

// OutcomeResult says what became of one outcome.
type OutcomeResult struct {
	Host    string `json:"host"`
	Outcome string `json:"outcome"`
	// Recorded: the store holds it (false for ignore, and on an error).
	Recorded bool `json:"recorded"`
	// Abandoned: an ignore with a probe_id released the probe's claim
	// (or found it already answered or taken over).
	Abandoned bool `json:"abandoned"`
	// Error is the store's error: the outcome was not recorded; report
	// it again.
	Error *string `json:"error"`
}

// AbandonRequest is POST /v1/abandon's body.
type AbandonRequest struct {
	ProbeID string `json:"probe_id"`
}

// AbandonResponse answers POST /v1/abandon.
type AbandonResponse struct {
	Host string `json:"host"`
}

// Circuit is one host's stored state (Breaker.Inspect).
type Circuit struct {
	Host  string `json:"host"`
	Found bool   `json:"found"`
	// State: closed, open or half-open.
	State        string      `json:"state"`
	FailureCount int         `json:"failure_count"`
	Failures     []time.Time `json:"failures"`
	// RestrainedUntil: deliveries are held until then (null if closed).
	RestrainedUntil *time.Time `json:"restrained_until"`
	RetryInMS       *int64     `json:"retry_in_ms"`
	Probing         bool       `json:"probing"`
	// Error: the record could not be decoded (the Breaker treats it as
	// absent) or read.
	Error *string `json:"error"`
}

// CircuitsResponse answers GET /v1/circuits.
type CircuitsResponse struct {
	Circuits   []Circuit `json:"circuits"`
	NextCursor *string   `json:"next_cursor"`
}

// ResetResponse answers DELETE /v1/circuits/{host}: the state before.
type ResetResponse struct {
	Host   string  `json:"host"`
	Before Circuit `json:"before"`
}

func ptr[T any](v T) *T { return &v }

// readBody reads the body into a pooled buffer (give it back with
// putBuf), answering a problem itself when it cannot.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) (*[]byte, bool) {
	if ct := r.Header.Get("Content-Type"); ct != "" && ct != "application/json" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			writeProblem(w, http.StatusUnsupportedMediaType, "unsupported-media-type", fmt.Sprintf("Content-Type is %q: send application/json", ct))
			return nil, false
		}
	}
	bp := getBuf()
	buf := *bp
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > s.cfg.MaxBody {
			*bp = buf
			putBuf(bp)
			// The rest of the body is not read: the connection cannot
			// carry another request.
			w.Header().Set("Connection", "close")
			writeProblem(w, http.StatusRequestEntityTooLarge, "too-large", fmt.Sprintf("the body is over %d bytes: send fewer items per request", s.cfg.MaxBody))
			return nil, false
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			*bp = buf
			putBuf(bp)
			writeProblem(w, http.StatusBadRequest, "bad-body", "the body could not be read ("+err.Error()+"): send it again")
			return nil, false
		}
	}
	*bp = buf
	return bp, true
}

// readJSON decodes the body into v, answering a problem itself when it
// cannot.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	bp, ok := s.readBody(w, r)
	if !ok {
		return false
	}
	defer putBuf(bp)
	return decodeJSON(w, *bp, v)
}

// decodeJSON decodes one JSON value, with no field v lacks, from body
// into v, answering a problem itself when it cannot.
func decodeJSON(w http.ResponseWriter, body []byte, v any) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.Decode(&struct{}{}) != io.EOF {
		err = errors.New("more than one JSON value")
	}
	if err == nil {
		return true
	}
	writeProblem(w, http.StatusBadRequest, "bad-json", "the body is not the JSON this route takes ("+err.Error()+"): see /openapi.json")
	return false
}

// batchSize checks a batch's length, answering a problem itself.
func (s *Server) batchSize(w http.ResponseWriter, n int, field string) bool {
	switch {
	case n == 0:
		writeProblem(w, http.StatusBadRequest, "empty", fmt.Sprintf("%q is empty: give at least one item", field))
		return false
	case n > s.cfg.MaxBatch:
		writeProblem(w, http.StatusRequestEntityTooLarge, "too-many", fmt.Sprintf("%q has %d items: send at most %d per request (--max-batch)", field, n, s.cfg.MaxBatch))
		return false
	}
	return true
}

// hostKey is the circuit key of a host name or URL.
func hostKey(h string) (string, error) {
	if h == "" {
		return "", errors.New("host is empty: give a host name or a delivery URL")
	}
	if k, ok := hostKeyFast(h); ok {
		return k, nil
	}
	return kvbreaker.HostKey(h)
}

func (s *Server) storeError(op string, err error) *string {
	msg := s.cfg.Redact(err.Error())
	s.log.Warn("kvbreaker serve: store error", "op", op, "error", msg)
	return &msg
}

func (s *Server) decide(w http.ResponseWriter, r *http.Request) {
	bp, ok := s.readBody(w, r)
	if !ok {
		return
	}
	defer putBuf(bp)
	// A request of a few deliveries keeps them on the stack.
	var small [4]delivery
	ds, ok := parseDecide(*bp, small[:0])
	if !ok {
		var req DecideRequest
		if !decodeJSON(w, *bp, &req) {
			return
		}
		ds = ds[:0]
		for _, d := range req.Deliveries {
			e := delivery{host: d.Host}
			if d.HeldSince != nil {
				e.held, e.hasHeld = *d.HeldSince, true
			}
			ds = append(ds, e)
		}
	}
	if !s.batchSize(w, len(ds), "deliveries") {
		return
	}
	var bad []itemError
	for i := range ds {
		k, err := hostKey(ds[i].host)
		if err != nil {
			bad = append(bad, itemError{fmt.Sprintf("/deliveries/%d/host", i), err.Error()})
		}
		ds[i].host = k
	}
	if len(bad) > 0 {
		writeProblem(w, http.StatusBadRequest, "invalid-host", "some hosts are neither a host name nor a URL: fix them; nothing was decided", bad...)
		return
	}
	var smallOut [4]Verdict
	out := smallOut[:0]
	if len(ds) > len(smallOut) {
		out = make([]Verdict, 0, len(ds))
	}
	// A held verdict's times and delay, pointed to by its fields: one
	// allocation for the request's holds rather than three per hold.
	var held []heldFields
	var probes []string
	for i, d := range ds {
		v, err := s.cfg.Breaker.Allow(r.Context(), d.host, d.held)
		out = append(out, Verdict{Host: d.host, Decision: v.Decision.String()})
		o := &out[len(out)-1]
		switch v.Decision {
		case kvbreaker.Hold:
			if held == nil {
				held = make([]heldFields, len(ds))
			}
			h := &held[i]
			h.retryAt, h.heldSince = v.RetryAt.UTC(), v.HeldSince.UTC()
			h.retryInMS = max(0, v.RetryAt.Sub(s.cfg.Clock()).Milliseconds())
			o.RetryAt, o.HeldSince, o.RetryInMS = &h.retryAt, &h.heldSince, &h.retryInMS
		case kvbreaker.Probe:
			if id := s.probes.add(d.host, v); id != "" {
				o.ProbeID = &id
				probes = append(probes, id)
			}
		}
		if err != nil {
			o.Error = s.storeError("allow", err)
		}
	}
	if r.Context().Err() != nil {
		// The client is gone: nobody will deliver these probes, so release
		// them now rather than hold the host for RecoveryDelay.
		for _, id := range probes {
			if e, ok := s.probes.take(id); ok {
				_ = s.cfg.Breaker.Abandon(context.WithoutCancel(r.Context()), e.host, e.v)
			}
		}
		return
	}
	rb := getBuf()
	defer putBuf(rb)
	*rb = appendVerdicts(*rb, out)
	h := w.Header()
	h["Content-Type"], h["Cache-Control"] = jsonType, noStore
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(*rb)
}

// heldFields are what a held verdict's pointer fields point to.
type heldFields struct {
	retryAt, heldSince time.Time
	retryInMS          int64
}

var outcomes = map[string]kvbreaker.Outcome{
	"success":           kvbreaker.Success,
	"reachable-failure": kvbreaker.ReachableFailure,
	"failure":           kvbreaker.Failure,
	"ignore":            kvbreaker.Ignore,
}

func (s *Server) outcomes(w http.ResponseWriter, r *http.Request) {
	var req OutcomesRequest
	if !s.readJSON(w, r, &req) || !s.batchSize(w, len(req.Outcomes), "outcomes") {
		return
	}
	keys := make([]string, len(req.Outcomes))
	var bad []itemError
	for i, o := range req.Outcomes {
		k, err := hostKey(o.Host)
		if err != nil {
			bad = append(bad, itemError{fmt.Sprintf("/outcomes/%d/host", i), err.Error()})
		}
		keys[i] = k
		if _, ok := outcomes[o.Outcome]; !ok {
			bad = append(bad, itemError{fmt.Sprintf("/outcomes/%d/outcome", i), fmt.Sprintf("outcome is %q: want success, reachable-failure, failure or ignore", o.Outcome)})
		}
		if o.ProbeID != "" && err == nil {
			if e, ok := s.probes.peek(o.ProbeID); ok && e.host != k {
				bad = append(bad, itemError{fmt.Sprintf("/outcomes/%d/probe_id", i), fmt.Sprintf("probe_id was given for host %q, not %q: send the probe_id of this host's verdict", e.host, k)})
			}
		}
	}
	if len(bad) > 0 {
		writeProblem(w, http.StatusBadRequest, "invalid-outcome", "some outcomes are invalid: fix them; nothing was recorded", bad...)
		return
	}
	// An outcome is recorded even when the client hangs up meanwhile: the
	// delivery happened. The Breaker's CallTimeout bounds each write.
	ctx := context.WithoutCancel(r.Context())
	out := OutcomesResponse{Results: make([]OutcomeResult, len(keys))}
	for i, o := range req.Outcomes {
		res := &out.Results[i]
		res.Host, res.Outcome = keys[i], o.Outcome
		oc := outcomes[o.Outcome]
		var probe probeEntry
		var isProbe bool
		if o.ProbeID != "" {
			probe, isProbe = s.probes.take(o.ProbeID)
		}
		var err error
		switch {
		case oc == kvbreaker.Ignore && isProbe:
			err = s.cfg.Breaker.Abandon(ctx, keys[i], probe.v)
			res.Abandoned = err == nil
		case oc != kvbreaker.Ignore:
			err = s.cfg.Breaker.Record(ctx, keys[i], oc)
			res.Recorded = err == nil
		}
		if err != nil {
			res.Error = s.storeError(o.Outcome, err)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) abandon(w http.ResponseWriter, r *http.Request) {
	var req AbandonRequest
	if !s.readJSON(w, r, &req) {
		return
	}
	if req.ProbeID == "" {
		writeProblem(w, http.StatusBadRequest, "empty", `"probe_id" is empty: give the probe_id of a probe verdict`)
		return
	}
	e, ok := s.probes.take(req.ProbeID)
	if !ok {
		writeProblem(w, http.StatusNotFound, "unknown-probe", "no probe has this probe_id here: it was answered or abandoned already, is older than the recovery delay (another worker may take it over), or was given by another serve process (send the abandon to the process that gave the probe)")
		return
	}
	if err := s.cfg.Breaker.Abandon(context.WithoutCancel(r.Context()), e.host, e.v); err != nil {
		writeProblem(w, http.StatusServiceUnavailable, "store", "the store failed; the probe was not released (it will be taken over after the recovery delay): "+*s.storeError("abandon", err))
		return
	}
	writeJSON(w, http.StatusOK, AbandonResponse{Host: e.host})
}

func (s *Server) circuit(st kvbreaker.Status, now time.Time) Circuit {
	c := Circuit{Host: st.Host, Found: st.Found, State: st.State.String(), FailureCount: len(st.Failures), Failures: st.Failures, Probing: st.Probing}
	if c.Failures == nil {
		c.Failures = []time.Time{}
	}
	if !st.RestrainedUntil.IsZero() {
		c.RestrainedUntil = ptr(st.RestrainedUntil.UTC())
		c.RetryInMS = ptr(max(0, st.RestrainedUntil.Sub(now).Milliseconds()))
	}
	if st.Err != nil {
		c.Error = ptr("undecodable record: " + st.Err.Error())
	}
	return c
}

func (s *Server) listCircuits(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := q.Get("state")
	switch state {
	case "", "open", "half-open", "closed":
	default:
		writeProblem(w, http.StatusBadRequest, "bad-query", fmt.Sprintf("state is %q: want open, half-open or closed", state))
		return
	}
	limit := 100
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > kvbreaker.MaxListLimit {
			writeProblem(w, http.StatusBadRequest, "bad-query", fmt.Sprintf("limit is %q: want 1 to %d", l, kvbreaker.MaxListLimit))
			return
		}
		limit = n
	}
	out, err := s.circuits(r.Context(), q.Get("cursor"), limit, state)
	if errors.Is(err, kvbreaker.ErrNoLister) {
		writeProblem(w, http.StatusNotImplemented, "no-lister", "this store cannot list its keys (driver.Lister): inspect hosts one by one with GET /v1/circuits/{host}")
		return
	}
	if err != nil {
		writeProblem(w, http.StatusServiceUnavailable, "store", "the store failed to list: "+*s.storeError("list", err))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// circuits reads one page of circuits (Breaker.List). A key the store
// failed to read is shown with state "unknown" and its error; a listing
// that failed is the error.
func (s *Server) circuits(ctx context.Context, cursor string, limit int, state string) (CircuitsResponse, error) {
	page, next, err := s.cfg.Breaker.List(ctx, cursor, limit)
	var unreadable []error
	if err != nil {
		for _, e := range unwrapJoined(err) {
			if u, ok := errors.AsType[*kvbreaker.UnreadableError](e); ok {
				unreadable = append(unreadable, u)
				continue
			}
			return CircuitsResponse{}, err
		}
	}
	out := CircuitsResponse{Circuits: []Circuit{}}
	now := s.cfg.Clock()
	for _, st := range page {
		if state == "" || st.State.String() == state {
			out.Circuits = append(out.Circuits, s.circuit(st, now))
		}
	}
	for _, e := range unreadable {
		u, _ := errors.AsType[*kvbreaker.UnreadableError](e)
		out.Circuits = append(out.Circuits, Circuit{Host: u.Host, State: "unknown", Failures: []time.Time{}, Error: s.storeError("inspect", u.Err)})
	}
	if next != "" {
		out.NextCursor = &next
	}
	return out, nil
}

// unwrapJoined returns the errors errors.Join joined in err, or err alone.
func unwrapJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// resolve finds the key a path's host names: as given when a record is
// stored under it (what a listing shows), else normalised (HostKey).
func (s *Server) resolve(w http.ResponseWriter, r *http.Request) (kvbreaker.Status, bool) {
	raw := r.PathValue("host")
	if driver.ValidateKey(raw) == nil {
		st, err := s.cfg.Breaker.Inspect(r.Context(), raw)
		if err != nil {
			writeProblem(w, http.StatusServiceUnavailable, "store", "the store failed to read the host: "+*s.storeError("inspect", err))
			return st, false
		}
		if st.Found {
			return st, true
		}
	}
	key, err := hostKey(raw)
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "invalid-host", fmt.Sprintf("%v: give a host name or a URL, path-escaped", err))
		return kvbreaker.Status{}, false
	}
	st, err := s.cfg.Breaker.Inspect(r.Context(), key)
	if err != nil {
		writeProblem(w, http.StatusServiceUnavailable, "store", "the store failed to read the host: "+*s.storeError("inspect", err))
		return st, false
	}
	return st, true
}

func (s *Server) inspect(w http.ResponseWriter, r *http.Request) {
	st, ok := s.resolve(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.circuit(st, s.cfg.Clock()))
}

func (s *Server) reset(w http.ResponseWriter, r *http.Request) {
	st, ok := s.resolve(w, r)
	if !ok {
		return
	}
	if err := s.cfg.Breaker.Reset(context.WithoutCancel(r.Context()), st.Host); err != nil {
		writeProblem(w, http.StatusServiceUnavailable, "store", "the store failed; the circuit was not reset: "+*s.storeError("reset", err))
		return
	}
	writeJSON(w, http.StatusOK, ResetResponse{Host: st.Host, Before: s.circuit(st, s.cfg.Clock())})
}
