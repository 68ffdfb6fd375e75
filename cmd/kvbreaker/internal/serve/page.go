package serve

import (
	"embed"
	"net/http"
	"strings"
)

// The status page: plain HTML, CSS and a script, embedded. It holds no
// data: its script reads GET /v1/status with a token the operator types.
//
//go:embed page
var pageFS embed.FS

var pageTypes = map[string]string{".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml"}

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/")
	if name == "" {
		name = "index.html"
	}
	b, err := pageFS.ReadFile("page/" + name)
	if err != nil {
		writeProblem(w, http.StatusNotFound, "not-found", "no such page file")
		return
	}
	h := w.Header()
	h.Set("Content-Type", pageTypes[name[strings.LastIndex(name, "."):]])
	// Only the page's own files run: a host name shown can never be code.
	h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}
