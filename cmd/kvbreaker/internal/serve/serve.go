// Package serve is the HTTP/JSON API of "kvbreaker serve": one Breaker per
// process, asked and told by workers in any language over HTTP, with the
// library's semantics (Allow, Success, ReachableFailure, Failure, Abandon,
// Inspect, Reset) and nothing more to learn, and its metrics for
// Prometheus. Every route but the OpenAPI document, the status page's
// files and the health check needs a bearer token or a verified client
// certificate that carries the route's permission; a request without one
// is refused before its body is read, so it changes nothing and learns
// nothing about hosts.
package serve

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/kvbreaker/kvbreaker"
)

// Limits a Config leaves zero get.
const (
	DefaultMaxBody  = 1 << 20
	DefaultMaxBatch = 1000
	// DefaultMaxProbes bounds the probes awaiting an outcome that the
	// server remembers (to abandon them); each is about 100 bytes.
	DefaultMaxProbes = 100_000
)

// Config is what New needs.
type Config struct {
	// Breaker decides and lists the circuits (Breaker.List; over a store
	// that cannot list, GET /v1/circuits answers 501); the server never
	// closes it.
	Breaker *kvbreaker.Breaker
	// ReadOnly serves only what reads the store (kvbreaker dashboard):
	// the routes that decide, record, abandon or reset answer 405 before
	// any credential or body is read, and the page offers no reset.
	ReadOnly bool
	// Tokens are the bearer tokens accepted.
	Tokens []Token
	// ClientCertPerms are the permissions a request whose TLS client
	// certificate was verified carries (mutual TLS), in addition to its
	// token's. Zero: a client certificate grants nothing by itself.
	ClientCertPerms Permission
	// RecoveryDelay is the Breaker's: a probe not answered within it can
	// be taken over by another worker, so the server forgets it then.
	RecoveryDelay time.Duration
	// MaxBody bounds a request body in bytes; MaxBatch the deliveries or
	// outcomes of one request; MaxProbes the probes remembered.
	MaxBody   int64
	MaxBatch  int
	MaxProbes int
	// Redact removes credentials from a store error's text before a
	// response or a log line shows it. Default: unchanged.
	Redact func(string) string
	Logger *slog.Logger
	// Stats, when set, is what GET /v1/status reports of the Breaker
	// (give Stats.Observer to its Settings).
	Stats *Stats
	// Metrics, when set, is what GET /metrics exports (give
	// Metrics.Observer to the Breaker's Settings too).
	Metrics *Metrics
	// Clock is the Breaker's clock, for retry_in_ms. Default time.Now.
	Clock func() time.Time
}

// Server serves the API.
type Server struct {
	cfg    Config
	tokens map[[sha256.Size]byte]Token
	probes *probeTable
	mux    *http.ServeMux
	// decideRoute is the mux's handler of decidePath, which Handler
	// calls without the mux's matching: every delivery of a fleet asks
	// it.
	decideRoute http.Handler
	handler     http.Handler
	log         *slog.Logger
}

// decidePath is the decision route's path.
const decidePath = "/v1/decide"

// route is one path and method and what it needs: the OpenAPI test walks
// this table.
type route struct {
	method, pattern string
	perm            Permission
	h               func(*Server, http.ResponseWriter, *http.Request)
	// write: the route may write to the store (Allow claims probes), so a
	// read-only server refuses it.
	write bool
}

var routes = []route{
	{http.MethodPost, "/v1/decide", PermDecide, (*Server).decide, true},
	{http.MethodPost, "/v1/outcomes", PermReport, (*Server).outcomes, true},
	{http.MethodPost, "/v1/abandon", PermReport, (*Server).abandon, true},
	{http.MethodGet, "/v1/circuits", PermRead, (*Server).listCircuits, false},
	{http.MethodGet, "/v1/circuits/{host}", PermRead, (*Server).inspect, false},
	{http.MethodDelete, "/v1/circuits/{host}", PermReset, (*Server).reset, true},
	{http.MethodGet, "/v1/status", PermRead, (*Server).status, false},
	{http.MethodGet, "/metrics", PermMetrics, (*Server).metrics, false},
	{http.MethodGet, "/{$}", 0, (*Server).page, false},
	{http.MethodGet, "/page.css", 0, (*Server).page, false},
	{http.MethodGet, "/page.js", 0, (*Server).page, false},
	{http.MethodGet, "/favicon.svg", 0, (*Server).page, false},
	{http.MethodGet, "/openapi.json", 0, (*Server).openapi, false},
	{http.MethodGet, "/healthz", 0, (*Server).healthz, false},
}

// New checks cfg and returns a Server. Every problem is in the one error.
func New(cfg Config) (*Server, error) {
	var errs []error
	if cfg.Breaker == nil {
		errs = append(errs, errors.New("serve: Config.Breaker is nil: give the Breaker to serve"))
	}
	if len(cfg.Tokens) == 0 && cfg.ClientCertPerms == 0 {
		errs = append(errs, errors.New("serve: no token and no client-certificate permissions: every request would be refused; give tokens (--tokens-file or $KVBREAKER_SERVE_TOKENS), or mutual TLS with --client-cert-permissions"))
	}
	if cfg.RecoveryDelay <= 0 {
		cfg.RecoveryDelay = kvbreaker.Settings{}.WithDefaults().RecoveryDelay
	}
	if cfg.MaxBody < 0 || cfg.MaxBatch < 0 || cfg.MaxProbes < 0 {
		errs = append(errs, fmt.Errorf("serve: MaxBody %d, MaxBatch %d, MaxProbes %d: none may be negative (zero for the defaults %d, %d, %d)",
			cfg.MaxBody, cfg.MaxBatch, cfg.MaxProbes, DefaultMaxBody, DefaultMaxBatch, DefaultMaxProbes))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.MaxProbes == 0 {
		cfg.MaxProbes = DefaultMaxProbes
	}
	if cfg.Redact == nil {
		cfg.Redact = func(s string) string { return s }
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	s := &Server{cfg: cfg, tokens: map[[sha256.Size]byte]Token{}, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	for _, t := range cfg.Tokens {
		s.tokens[t.digest] = t
	}
	s.probes = newProbeTable(cfg.RecoveryDelay, cfg.MaxProbes, cfg.Clock)
	s.mux = http.NewServeMux()
	byPattern := map[string][]route{}
	var order []string
	for _, r := range routes {
		if _, ok := byPattern[r.pattern]; !ok {
			order = append(order, r.pattern)
		}
		byPattern[r.pattern] = append(byPattern[r.pattern], r)
	}
	for _, p := range order {
		h := s.dispatch(byPattern[p])
		if p == decidePath {
			s.decideRoute = h
		}
		s.mux.Handle(p, h)
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, http.StatusNotFound, "not-found", fmt.Sprintf("no route %s: the API is described at /openapi.json", r.URL.Path))
	})
	s.handler = http.HandlerFunc(s.serveHTTP)
	return s, nil
}

// Handler is the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.handler }

// serveHTTP sends a request for decidePath, spelled without escapes,
// straight to its route, which the mux would pick for it with any method
// and host (its pattern names neither, and the path is already clean);
// everything else goes through the mux. TestDecideRouteAsMux holds the
// two to the same answers.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == decidePath && r.URL.RawPath == "" {
		r.Pattern = decidePath
		s.decideRoute.ServeHTTP(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// dispatch picks the route of a method on one path, checks permissions
// before anything is read, and runs it.
func (s *Server) dispatch(rs []route) http.Handler {
	var allowed, reads []string
	for _, r := range rs {
		allowed = append(allowed, r.method)
		if !r.write {
			reads = append(reads, r.method)
		}
	}
	allow := strings.Join(allowed, ", ")
	if s.cfg.ReadOnly {
		allow = strings.Join(reads, ", ")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		for _, r := range rs {
			if req.Method != r.method && (r.method != http.MethodGet || req.Method != http.MethodHead) {
				continue
			}
			if r.write && s.cfg.ReadOnly {
				w.Header().Set("Allow", allow)
				writeProblem(w, http.StatusMethodNotAllowed, "read-only", fmt.Sprintf("%s %s writes to the store, and this is kvbreaker dashboard, which only reads it: send decisions and outcomes to kvbreaker serve, and reset a circuit there or with kvbreaker reset", req.Method, req.URL.Path))
				return
			}
			if r.perm != 0 && !s.authorize(w, req, r.perm) {
				return
			}
			r.h(s, w, req)
			return
		}
		w.Header().Set("Allow", allow)
		writeProblem(w, http.StatusMethodNotAllowed, "method-not-allowed", fmt.Sprintf("%s does not take %s: use %s", req.URL.Path, req.Method, allow))
	})
}

// authorize reports whether req carries perm, and otherwise answers 401
// or 403 itself. The answer depends only on the credentials, never on
// what the request asks about.
func (s *Server) authorize(w http.ResponseWriter, req *http.Request, perm Permission) bool {
	var have Permission
	// Who asks, as "kind name": joined only when a refusal says it, so
	// that an allowed request allocates nothing for it.
	kind, name := "", ""
	if req.TLS != nil && len(req.TLS.VerifiedChains) > 0 {
		have |= s.cfg.ClientCertPerms
		kind, name = "client certificate ", req.TLS.VerifiedChains[0][0].Subject.CommonName
	}
	authz := req.Header.Get("Authorization")
	if authz != "" {
		scheme, tok, ok := strings.Cut(authz, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kvbreaker"`)
			writeProblem(w, http.StatusUnauthorized, "unauthorized", "the Authorization header is not \"Bearer TOKEN\": send a token from the server's tokens file that way")
			return false
		}
		t, found := s.lookup(strings.TrimSpace(tok))
		if !found {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kvbreaker", error="invalid_token"`)
			writeProblem(w, http.StatusUnauthorized, "unauthorized", "the bearer token is not one this server accepts: check it against the server's tokens file")
			return false
		}
		have |= t.Perms
		kind, name = "token ", t.Name
	}
	if kind == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="kvbreaker"`)
		writeProblem(w, http.StatusUnauthorized, "unauthorized", "no credentials: send \"Authorization: Bearer TOKEN\" with a token from the server's tokens file")
		return false
	}
	if have&perm != perm {
		writeProblem(w, http.StatusForbidden, "forbidden", fmt.Sprintf("%s%s lacks the %q permission this route needs (it has %q): add it to the token's line in the tokens file", kind, name, perm.String(), have.String()))
		return false
	}
	return true
}

// lookup finds tok by its digest; the digests are compared in constant
// time, so timing shows nothing of a token.
func (s *Server) lookup(tok string) (Token, bool) {
	d := sha256.Sum256([]byte(tok))
	t, ok := s.tokens[d]
	if !ok || subtle.ConstantTimeCompare(t.digest[:], d[:]) != 1 {
		return Token{}, false
	}
	return t, true
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
