package serve

import (
	"fmt"
	"net/http"
	"strings"
)

// The server's request path before the decision route skipped the mux
// and an allowed request stopped joining its credential's name: copied
// here, so that BenchmarkDecideHandler measures the two side by side in
// one run (its before/ rows).

// beforeHandler is s's routes behind a ServeMux, dispatched and
// authorized as before.
func beforeHandler(s *Server) http.Handler {
	mux := http.NewServeMux()
	byPattern := map[string][]route{}
	var order []string
	for _, r := range routes {
		if _, ok := byPattern[r.pattern]; !ok {
			order = append(order, r.pattern)
		}
		byPattern[r.pattern] = append(byPattern[r.pattern], r)
	}
	for _, p := range order {
		mux.Handle(p, s.dispatchBefore(byPattern[p]))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, http.StatusNotFound, "not-found", fmt.Sprintf("no route %s: the API is described at /openapi.json", r.URL.Path))
	})
	return mux
}

// dispatch picks the route of a method on one path, checks permissions
// before anything is read, and runs it.
func (s *Server) dispatchBefore(rs []route) http.Handler {
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
			if r.perm != 0 && !s.authorizeBefore(w, req, r.perm) {
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
func (s *Server) authorizeBefore(w http.ResponseWriter, req *http.Request, perm Permission) bool {
	var have Permission
	name := ""
	if req.TLS != nil && len(req.TLS.VerifiedChains) > 0 {
		have |= s.cfg.ClientCertPerms
		name = "client certificate " + req.TLS.VerifiedChains[0][0].Subject.CommonName
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
		name = "token " + t.Name
	}
	if name == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="kvbreaker"`)
		writeProblem(w, http.StatusUnauthorized, "unauthorized", "no credentials: send \"Authorization: Bearer TOKEN\" with a token from the server's tokens file")
		return false
	}
	if have&perm != perm {
		writeProblem(w, http.StatusForbidden, "forbidden", fmt.Sprintf("%s lacks the %q permission this route needs (it has %q): add it to the token's line in the tokens file", name, perm.String(), have.String()))
		return false
	}
	return true
}
