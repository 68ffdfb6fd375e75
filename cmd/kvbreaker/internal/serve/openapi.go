package serve

import (
	_ "embed"
	"net/http"
	"strconv"
)

// openapiDoc is the API's OpenAPI 3.1 document; TestOpenAPIMatchesHandlers
// holds it to the routes and the Go types.
//
//go:embed openapi.json
var openapiDoc []byte

func (s *Server) openapi(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(openapiDoc)))
	_, _ = w.Write(openapiDoc)
}
