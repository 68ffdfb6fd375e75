package serve

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// problem is an RFC 9457 problem detail. Type is a URN per kind of
// problem, so a client can branch on it; Detail says what to change.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	// Errors lists each invalid item of a request, by its place.
	Errors []itemError `json:"errors,omitempty"`
}

// itemError is one invalid item of a batch.
type itemError struct {
	Pointer string `json:"pointer"`
	Detail  string `json:"detail"`
}

const problemPrefix = "urn:kvbreaker:problem:"

func writeProblem(w http.ResponseWriter, status int, kind, detail string, errs ...itemError) {
	p := problem{Type: problemPrefix + kind, Title: http.StatusText(status), Status: status, Detail: detail, Errors: errs}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	b, _ := json.Marshal(p)
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeProblem(w, http.StatusInternalServerError, "internal", "the response could not be encoded: "+err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
