// Package miniflare runs a small Worker (worker.js) under Miniflare
// (npm miniflare@4.20260426.0, pinned in this directory's package.json and
// package-lock.json) on 127.0.0.1, serving the Workers KV subset of
// Cloudflare's v4 REST API over a real Miniflare KV binding, so the 60 s
// minimum TTL, whole-second expiry and key/metadata limits are Cloudflare's
// simulator's, not ours.
//
// The first Start in a fresh checkout runs `npm ci` here (node_modules is
// git-ignored); it needs node (20 or later) and npm on PATH and the npm
// registry. A missing tool fails with the fix in the message, never a skip.
//
//	srv := miniflare.MustStart(t)                 // stopped by t.Cleanup
//	client := kv.NewKVService(option.WithBaseURL(srv.BaseURL()), option.WithAPIToken(srv.Token))
//	store, err := cloudflarekv.New(client, srv.AccountID, srv.NamespaceID, cloudflarekv.WithClock(srv.Now))
//	srv.Advance(ctx, 61*time.Second)          // KV expiry without waiting
//
// In TestMain, where there is no testing.TB, use Start and Stop.
//
// Time: the KV's clock starts at the real time of launch and then stands
// still; only Advance moves it (Miniflare's internal fake timers, the control
// operation Miniflare's own tests use, re-pinned every second so an evicted
// Durable Object cannot fall back to real time). Now returns the same
// instant, so a store or Breaker whose clock is Now judges logical expiry
// exactly as the simulator judges physical expiry, to the millisecond.
// Nothing expires in real time: tests that wait must Advance.
package miniflare

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/testservers/launcher"
)

// DirEnv overrides the directory holding worker.js, launch.js and
// package.json (by default found from this source file's path, which
// -trimpath removes).
const DirEnv = "KVBREAKER_MINIFLARE_DIR"

// startTimeout bounds startup once installed: node loading Miniflare and
// workerd listening. The wait ends as soon as it listens; the bound only
// catches a server that never will, so it leaves room for a loaded
// machine (on 2 shared cores at a load average of 52, Miniflare was not
// listening after 60 s).
const startTimeout = 3 * time.Minute

// stopGrace is how long Stop waits for Miniflare to dispose workerd before
// killing the process group.
const stopGrace = 5 * time.Second

// Server is a running Miniflare process. Its methods are safe for concurrent
// use.
type Server struct {
	// URL is the Worker's origin, http://127.0.0.1:PORT.
	URL string
	// AccountID and NamespaceID are the IDs the REST routes accept.
	AccountID, NamespaceID string
	// Token is the bearer token every API request must carry.
	Token string

	writeLimit bool

	mu  sync.Mutex
	now time.Time // the KV clock
	// owed is what Advance was asked for beyond the whole milliseconds
	// the KV's clock moved: the next Advance adds it, so a run of
	// sub-millisecond steps moves the clock as far as their sum.
	owed time.Duration
	proc *launcher.Process // nil before start
}

// Option configures Start and MustStart.
type Option func(*Server)

// WriteLimit makes the Worker answer a second write (PUT or DELETE) to one
// key within a second with 429 and Retry-After: 1, as Cloudflare does.
func WriteLimit() Option { return func(s *Server) { s.writeLimit = true } }

// MustStart launches Miniflare, fails tb if it cannot, and stops it in
// tb.Cleanup.
func MustStart(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	s, err := Start(tb.Context(), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// Start installs Miniflare if needed and starts it on a free port, with a
// random account ID, namespace ID and API token. The caller must call Stop.
func Start(ctx context.Context, opts ...Option) (*Server, error) {
	s := &Server{
		AccountID:   randomHex(16),
		NamespaceID: randomHex(16),
		Token:       "test-token-" + randomHex(12),
	}
	for _, o := range opts {
		o(s)
	}
	if err := Install(ctx); err != nil {
		return nil, err
	}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// BaseURL is what cloudflare-go's option.WithBaseURL takes: URL + "/client/v4/".
func (s *Server) BaseURL() string { return s.URL + "/client/v4/" }

// Now returns the KV's current time, which only Advance moves.
func (s *Server) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// Advance moves the KV's clock (and Now) forward by d: entries whose
// expiration has passed become invisible at once. The KV's clock counts
// whole milliseconds, so a fraction is carried to the next Advance rather
// than dropped (dropped, ten steps of 1.5 ms would move it 10 ms, not 15).
func (s *Server) Advance(ctx context.Context, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("miniflare: advance by %v: cannot go back in time", d)
	}
	s.mu.Lock()
	defer s.mu.Unlock() // Now waits until the server's clock has moved too
	ms := (s.owed + d).Milliseconds()
	b, err := s.control(ctx, http.MethodPost, "advance?ms="+strconv.FormatInt(ms, 10))
	if err != nil {
		return err
	}
	s.owed += d - time.Duration(ms)*time.Millisecond
	now, err := parseClock(b)
	if err != nil {
		return err
	}
	s.now = now
	return nil
}

func parseClock(b []byte) (time.Time, error) {
	var c struct {
		NowMS *int64 `json:"now_ms"`
	}
	if err := json.Unmarshal(b, &c); err != nil || c.NowMS == nil {
		return time.Time{}, fmt.Errorf("miniflare: bad clock answer %q (%v)", b, err)
	}
	return time.UnixMilli(*c.NowMS), nil
}

// Throttle makes the next count API requests fail with 429 and the given
// Retry-After (whole seconds, at least 1).
func (s *Server) Throttle(ctx context.Context, count int, retryAfter time.Duration) error {
	secs := max(1, int((retryAfter+time.Second-1)/time.Second))
	_, err := s.control(ctx, http.MethodPost, fmt.Sprintf("throttle?count=%d&retry_after=%d", count, secs))
	return err
}

// Stats counts the API requests the Worker has served since the last
// ResetStats.
type Stats struct {
	Get, Put, Delete int
	// Throttled counts 429s sent because of Throttle; RateLimited those
	// sent by the one-write-per-second-per-key limit.
	Throttled, RateLimited int
}

// Stats returns the request counts.
func (s *Server) Stats(ctx context.Context) (Stats, error) {
	b, err := s.control(ctx, http.MethodGet, "stats")
	if err != nil {
		return Stats{}, err
	}
	var raw struct {
		GET, PUT, DELETE, Throttled, RateLimited int
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return Stats{}, fmt.Errorf("miniflare: stats: %w", err)
	}
	return Stats{Get: raw.GET, Put: raw.PUT, Delete: raw.DELETE, Throttled: raw.Throttled, RateLimited: raw.RateLimited}, nil
}

// ResetStats zeroes the request counts and forgets the write limiter's
// history.
func (s *Server) ResetStats(ctx context.Context) error {
	_, err := s.control(ctx, http.MethodPost, "reset-stats")
	return err
}

// Do sends an API request with the server's token (for tests that look
// beneath an adapter). path is relative to
// /client/v4/accounts/:account/storage/kv/namespaces/:namespace/.
func (s *Server) Do(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	u := s.BaseURL() + "accounts/" + s.AccountID + "/storage/kv/namespaces/" + s.NamespaceID + "/" + path
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	return http.DefaultClient.Do(req)
}

// RawGet returns the stored value and metadata of key (unescaped), bypassing
// any adapter; found is false on 404.
func (s *Server) RawGet(ctx context.Context, key string) (value []byte, metadata json.RawMessage, found bool, err error) {
	esc := url.PathEscape(key)
	res, err := s.Do(ctx, http.MethodGet, "values/"+esc, nil)
	if err != nil {
		return nil, nil, false, err
	}
	value, err = io.ReadAll(res.Body)
	_ = res.Body.Close()
	switch {
	case err != nil:
		return nil, nil, false, err
	case res.StatusCode == http.StatusNotFound:
		return nil, nil, false, nil
	case res.StatusCode != http.StatusOK:
		return nil, nil, false, fmt.Errorf("miniflare: get %q: %s: %s", key, res.Status, value)
	}
	res, err = s.Do(ctx, http.MethodGet, "metadata/"+esc, nil)
	if err != nil {
		return nil, nil, false, err
	}
	defer func() { _ = res.Body.Close() }()
	var env struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.NewDecoder(res.Body).Decode(&env); err != nil {
		return nil, nil, false, fmt.Errorf("miniflare: metadata %q: %w", key, err)
	}
	return value, env.Result, true, nil
}

// Key is one entry of a keys listing.
type Key struct {
	Name       string          `json:"name"`
	Expiration int64           `json:"expiration"`
	Metadata   json.RawMessage `json:"metadata"`
}

// List returns the keys (up to 1000) starting with prefix.
func (s *Server) List(ctx context.Context, prefix string) ([]Key, error) {
	res, err := s.Do(ctx, http.MethodGet, "keys?prefix="+url.QueryEscape(prefix), nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = res.Body.Close() }()
	var env struct {
		Success bool  `json:"success"`
		Result  []Key `json:"result"`
	}
	if err := json.NewDecoder(res.Body).Decode(&env); err != nil || !env.Success {
		return nil, fmt.Errorf("miniflare: list %q: %s (%v)", prefix, res.Status, err)
	}
	return env.Result, nil
}

// controlClient opens a connection per control request. On a kept-alive
// connection, a request sent as the server closes it for idleness fails
// with EOF after it was written, and the client cannot know whether an
// advance was applied, so it can neither retry nor report the clock.
var controlClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

func (s *Server) control(ctx context.Context, method, op string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.URL+"/__kvbreaker/"+op, nil)
	if err != nil {
		return nil, err
	}
	res, err := controlClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("miniflare: %s: %w", op, err)
	}
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("miniflare: %s: %w", op, err)
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("miniflare: %s: %s: %s", op, res.Status, b)
	}
	return b, nil
}

// Dir returns the fixture directory (worker.js, launch.js, package.json).
func Dir() (string, error) {
	_, file, _, _ := runtime.Caller(0)
	return launcher.Dir("miniflare", DirEnv, file)
}

// Install runs `npm ci` in the fixture directory if node_modules/miniflare is
// missing; concurrent test binaries serialise on a lock file.
func Install(ctx context.Context) error {
	dir, err := Dir()
	if err != nil {
		return err
	}
	return launcher.Install(ctx, "miniflare", dir, "miniflare")
}

func (s *Server) start(ctx context.Context) error {
	dir, err := Dir()
	if err != nil {
		return err
	}
	cmd := exec.Command("node", filepath.Join(dir, "launch.js"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"KVB_ACCOUNT_ID="+s.AccountID,
		"KVB_NAMESPACE_ID="+s.NamespaceID,
		"KVB_API_TOKEN="+s.Token,
		"KVB_WRITE_LIMIT="+map[bool]string{true: "1"}[s.writeLimit],
	)
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	// Its own process group, so Stop can end workerd (node's child) by the
	// group id even if node dies first.
	proc, origin, err := launcher.Start(ctx, "miniflare", cmd, readyURL, startTimeout,
		launcher.Group(), launcher.StopOnTimeout(stopGrace))
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.proc = proc
	s.mu.Unlock()
	s.URL = origin
	b, err := s.control(ctx, http.MethodGet, "clock")
	if err == nil {
		var now time.Time
		if now, err = parseClock(b); err == nil {
			s.mu.Lock()
			s.now = now
			s.mu.Unlock()
			return nil
		}
	}
	s.Stop()
	return fmt.Errorf("miniflare fixture: %w; stderr: %s", err, proc.Stderr())
}

// readyURL recognises the launcher's JSON line with the Worker's url.
func readyURL(line []byte) (string, bool) {
	var l struct {
		URL string `json:"url"`
	}
	if json.Unmarshal(line, &l) != nil || l.URL == "" {
		return "", false
	}
	return l.URL, true
}

// PID returns node's process id (also the process group id of node and
// workerd), or 0 when stopped.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.PID()
}

// Stop asks the launcher to exit (its stdin closes; Miniflare disposes
// workerd), kills the process group by id after 5 s if it has not, and
// waits. Stop is idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	proc := s.proc
	s.mu.Unlock()
	if proc == nil {
		return
	}
	// Also kills the group afterwards: workerd normally exits with node;
	// make sure nothing of the group survives.
	proc.Stop(stopGrace)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
